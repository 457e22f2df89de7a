import struct

import pytest

from moldau.protocol.framing import FrameReader, FrameTooLarge, frame


def sized(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_whole_frames_in_one_read() -> None:
    reader = FrameReader(1024)
    assert reader.feed(sized(b"abc") + sized(b"") + sized(b"defg")) == [b"abc", b"", b"defg"]
    assert reader.buffered_bytes == 0


def test_frames_split_at_every_byte() -> None:
    data = sized(b"hello") + sized(b"world!") + sized(b"x" * 300)
    reader = FrameReader(1024)
    frames = []
    for i in range(len(data)):
        frames += reader.feed(data[i : i + 1])
    assert frames == [b"hello", b"world!", b"x" * 300]


def test_partial_then_rest() -> None:
    reader = FrameReader(1024)
    data = sized(b"first") + sized(b"second")
    assert reader.feed(data[:7]) == []
    assert reader.feed(data[7:]) == [b"first", b"second"]


@pytest.mark.parametrize("size", [-1, -(2**31), 1025, 2**31 - 1])
def test_size_prefix_out_of_bounds_is_refused_before_buffering(size: int) -> None:
    reader = FrameReader(1024)
    with pytest.raises(FrameTooLarge):
        reader.feed(struct.pack(">i", size))
    assert reader.buffered_bytes <= 4  # the prefix only: nothing was allocated for the announced body


def test_oversized_after_buffered_prefix() -> None:
    reader = FrameReader(10)
    assert reader.feed(sized(b"ok")[:3]) == []
    assert reader.feed(sized(b"ok")[3:]) == [b"ok"]
    with pytest.raises(FrameTooLarge):
        reader.feed(b"\x00\x00" + b"\x00\x0b")


def test_frame_prefixes_total_size() -> None:
    assert b"".join(frame([b"ab", b"cde"])) == sized(b"abcde")


def test_large_frame_gets_its_own_buffer_and_small_ones_follow() -> None:
    reader = FrameReader(10**7, receive_buffer_bytes=64)
    big = b"B" * 1000
    data = sized(b"s1") + sized(big) + sized(b"s2") + sized(b"s3")
    assert reader.feed(data) == [b"s1", big, b"s2", b"s3"]
    assert reader.buffered_bytes == 0


def test_frame_exactly_filling_the_receive_buffer() -> None:
    reader = FrameReader(10**6, receive_buffer_bytes=64)
    payload = b"x" * 60
    assert reader.feed(sized(payload) * 3) == [payload] * 3


def test_random_chunking_against_a_model() -> None:
    import random

    rng = random.Random(7)
    payloads = [bytes([i % 256]) * rng.choice([0, 1, 5, 63, 64, 65, 200, 5000]) for i in range(300)]
    data = b"".join(sized(p) for p in payloads)
    reader = FrameReader(10**6, receive_buffer_bytes=128)
    got: list[bytes] = []
    pos = 0
    while pos < len(data):
        target = reader.get_buffer()
        n = min(len(target), rng.randint(1, 300), len(data) - pos)
        target[:n] = data[pos : pos + n]
        pos += n
        got += reader.buffer_updated(n)
    assert got == payloads
