import struct

import pytest

from moldau.protocol.framing import Frame, FrameReader, FrameTooLarge, frame


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
    reader = FrameReader(10**7, receive_buffer=memoryview(bytearray(64)), large_frame_bytes=100)
    big = b"B" * 1000
    data = sized(b"s1") + sized(big) + sized(b"s2") + sized(b"s3")
    assert reader.feed(data) == [b"s1", big, b"s2", b"s3"]
    assert reader.buffered_bytes == 0


def test_frame_exactly_filling_the_receive_buffer() -> None:
    reader = FrameReader(10**6, receive_buffer=memoryview(bytearray(64)), large_frame_bytes=100)
    payload = b"x" * 60
    assert reader.feed(sized(payload) * 3) == [payload] * 3


def test_random_chunking_against_a_model() -> None:
    import random

    rng = random.Random(7)
    payloads = [bytes([i % 256]) * rng.choice([0, 1, 5, 63, 64, 65, 200, 5000]) for i in range(300)]
    data = b"".join(sized(p) for p in payloads)
    reader = FrameReader(10**6, receive_buffer=memoryview(bytearray(128)), large_frame_bytes=100)
    got: list[Frame] = []
    pos = 0
    while pos < len(data):
        target = reader.get_buffer()
        n = min(len(target), rng.randint(1, 300), len(data) - pos)
        target[:n] = data[pos : pos + n]
        pos += n
        got += reader.buffer_updated(n)
    assert got == payloads


def test_memory_follows_what_arrived_not_what_was_declared() -> None:
    reader = FrameReader(100 * 2**20, receive_buffer=memoryview(bytearray(256)), large_frame_bytes=1024)
    assert reader.feed(struct.pack(">i", 100 * 2**20) + b"x" * 10) == []
    assert reader.frame_in_progress
    assert reader.buffered_bytes == 1024  # the first allocation of a large frame, not its 100 MiB
    reader.feed(b"y" * 5000)
    assert reader.buffered_bytes == 8192  # doubled as bytes arrived: 1 KiB, 2, 4, 8
    reader.release()
    assert reader.buffered_bytes == 0 and not reader.frame_in_progress


def test_an_idle_reader_holds_nothing_and_a_small_partial_frame_only_its_bytes() -> None:
    reader = FrameReader(1024, receive_buffer=memoryview(bytearray(256)))
    assert reader.buffered_bytes == 0
    reader.feed(struct.pack(">i", 500) + b"abc")
    assert reader.buffered_bytes == 7
    assert reader.feed(b"d" * 497) == [b"abc" + b"d" * 497]
    assert reader.buffered_bytes == 0


def test_a_large_frame_arrives_whole_and_read_only() -> None:
    reader = FrameReader(10**7, receive_buffer=memoryview(bytearray(256)), large_frame_bytes=1024)
    payload = bytes(range(256)) * 4000
    frames = reader.feed(sized(payload) + sized(b"next"))
    assert frames == [payload, b"next"]
    assert isinstance(frames[0], memoryview) and frames[0].readonly


def test_readers_share_the_receive_buffer() -> None:
    shared = memoryview(bytearray(64))
    one, two = FrameReader(1024, receive_buffer=shared), FrameReader(1024, receive_buffer=shared)
    assert one.feed(sized(b"a") + struct.pack(">i", 10) + b"1234") == [b"a"]
    assert two.feed(sized(b"b" * 30)) == [b"b" * 30]
    assert one.feed(b"567890") == [b"1234567890"]


def test_large_and_small_frames_split_at_every_byte_boundary() -> None:
    payloads = [b"a" * 3, bytes(range(200)), b"", b"z" * 150, b"q"]
    data = b"".join(sized(p) for p in payloads)
    for cut in range(len(data) + 1):
        reader = FrameReader(1000, receive_buffer=memoryview(bytearray(32)), large_frame_bytes=64)
        assert reader.feed(data[:cut]) + reader.feed(data[cut:]) == payloads, cut
        assert reader.buffered_bytes == 0 and not reader.frame_in_progress
    reader = FrameReader(1000, receive_buffer=memoryview(bytearray(32)), large_frame_bytes=64)
    got: list[Frame] = []
    for i in range(len(data)):
        got += reader.feed(data[i : i + 1])
        assert reader.buffered_bytes <= max(64, 2 * (i + 1))  # never more than about twice what arrived
    assert got == payloads
