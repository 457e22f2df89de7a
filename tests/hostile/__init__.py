"""Hostile input against a real broker: every API at every advertised version, valid and mangled.

`test_fuzz_frames.py` sends, for each (API, version) the broker advertises, request bodies generated from kio's
schemas (`tests/support/entities.py`) in five kinds: valid random values, bit-flipped, truncated, one length or
count replaced by a huge value, and random bytes. It asserts that the broker never dies, that every frame is
answered with a decodable response (or its connection is closed), that no traceback reaches the log, that memory
stays bounded, and that a normal client keeps its round trip throughout.

    ./dev test tests/hostile                          # the CI form: 20,000 frames, one seed
    MOLDAU_FUZZ_SEED=1234 ./dev test tests/hostile    # replay one seed (the seed is printed on failure)
    MOLDAU_FUZZ_FRAMES=2000000 ./dev test tests/hostile --timeout 0   # the long run
"""
