import struct

import pytest

from moldau.protocol.framing import Frame, FrameBufferPool, FrameReader, FrameTooLarge, frame
from tests.support.wire import in_memory


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
    assert in_memory(frame([b"ab", b"cde"])) == sized(b"abcde")


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


def _pooled_reader(pool: FrameBufferPool) -> FrameReader:
    return FrameReader(10**7, receive_buffer=memoryview(bytearray(256)), large_frame_bytes=1024, pool=pool)


def test_a_large_frame_buffer_is_reused_once_its_frame_is_gone() -> None:
    pool = FrameBufferPool()
    reader = _pooled_reader(pool)
    (first,) = reader.feed(sized(b"a" * 5000))
    assert len(pool) == 1
    reader.feed(struct.pack(">i", 5000) + b"b" * 10)
    assert len(pool) == 1  # the first frame is alive: its buffer stays where it is, a new one is grown
    assert first == b"a" * 5000
    (second,) = reader.feed(b"b" * 4990)
    assert len(pool) == 2
    del first
    reader.feed(struct.pack(">i", 5000) + b"c" * 10)
    assert len(pool) == 1  # the first frame's buffer was taken ...
    assert reader.buffered_bytes == 10  # ... and only the bytes that arrived in it are charged
    (third,) = reader.feed(b"c" * 4990)
    assert third == b"c" * 5000 and second == b"b" * 5000
    assert isinstance(third, memoryview) and third.readonly and len(third) == 5000


def test_a_slice_kept_from_a_frame_keeps_its_buffer_from_reuse() -> None:
    pool = FrameBufferPool()
    reader = _pooled_reader(pool)
    (first,) = reader.feed(sized(b"k" * 3000))
    kept = first[100:200]  # as a request would keep a record batch's view
    del first
    (second,) = reader.feed(sized(b"n" * 3000))
    assert kept == b"k" * 100 and second == b"n" * 3000
    assert len(pool) == 2


def test_a_pooled_buffer_longer_than_the_frame_is_read_into_only_up_to_the_frame() -> None:
    pool = FrameBufferPool()
    reader = _pooled_reader(pool)
    (first,) = reader.feed(sized(b"L" * 6000))
    del first
    frames = reader.feed(sized(b"s" * 4000) + sized(b"after"))
    assert frames == [b"s" * 4000, b"after"]
    assert len(frames[0]) == 4000


def test_the_pool_is_bounded_in_buffers_and_size() -> None:
    pool = FrameBufferPool(max_buffers=2, max_buffer_bytes=8000)
    reader = _pooled_reader(pool)
    frames = [reader.feed(sized(bytes([i]) * 2000))[0] for i in range(4)]
    assert len(pool) == 2
    frames.append(reader.feed(sized(b"x" * 9000))[0])
    assert len(pool) == 2  # too large to keep
    assert [bytes(f[:1]) for f in frames] == [b"\x00", b"\x01", b"\x02", b"\x03", b"x"]


def test_a_small_frame_does_not_take_a_much_larger_pooled_buffer() -> None:
    pool = FrameBufferPool()
    reader = _pooled_reader(pool)
    del reader.feed(sized(b"h" * 9000))[0]
    reader.feed(struct.pack(">i", 2000) + b"s")
    assert len(pool) == 1 and reader.buffered_bytes == 1024  # grown afresh, the 9000-byte buffer left alone


def test_a_connection_gone_mid_frame_leaves_its_pooled_buffer_to_the_next() -> None:
    pool = FrameBufferPool()
    reader = _pooled_reader(pool)
    del reader.feed(sized(b"p" * 3000))[0]
    reader.feed(struct.pack(">i", 3000) + b"partial")
    assert len(pool) == 0
    reader.release()
    assert len(pool) == 1 and reader.buffered_bytes == 0
    other = _pooled_reader(pool)
    assert other.feed(sized(b"q" * 3000)) == [b"q" * 3000]


def test_the_most_recently_freed_buffer_is_reused_first() -> None:
    pool = FrameBufferPool()
    reader = _pooled_reader(pool)
    first, second = reader.feed(sized(b"1" * 3000) + sized(b"2" * 3000))
    assert isinstance(first, memoryview) and isinstance(second, memoryview)
    given_last = second.obj
    del first, second
    (third,) = reader.feed(sized(b"3" * 3000))
    assert isinstance(third, memoryview) and third.obj is given_last and third == b"3" * 3000


def test_after_a_large_frame_the_next_size_prefix_is_read_alone_and_the_body_goes_straight_to_its_buffer() -> None:
    pool = FrameBufferPool()
    reader = _pooled_reader(pool)
    assert len(reader.get_buffer()) > 4
    del reader.feed(sized(b"a" * 5000))[0]
    prefix_buffer = reader.get_buffer()
    assert len(prefix_buffer) == 4
    prefix_buffer[:] = struct.pack(">i", 5000)
    assert reader.buffer_updated(4) == []
    body_buffer = reader.get_buffer()
    assert len(body_buffer) == 5000  # the pooled buffer, from the body's first byte: nothing is copied into it
    body_buffer[:] = b"b" * 5000
    assert reader.buffer_updated(5000) == [b"b" * 5000]


def test_a_small_frame_after_a_large_one_ends_the_prefix_reads() -> None:
    reader = _pooled_reader(FrameBufferPool())
    del reader.feed(sized(b"a" * 5000))[0]
    assert reader.feed(sized(b"small") + sized(b"more")) == [b"small", b"more"]
    assert len(reader.get_buffer()) > 4
