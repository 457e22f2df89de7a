import struct

import pytest

from moldau.protocol.framing import FrameDecoder, FrameTooLarge, frame


def sized(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_whole_frames_in_one_read() -> None:
    decoder = FrameDecoder(1024)
    assert decoder.feed(sized(b"abc") + sized(b"") + sized(b"defg")) == [b"abc", b"", b"defg"]
    assert decoder.buffered_bytes == 0


def test_frames_split_at_every_byte() -> None:
    data = sized(b"hello") + sized(b"world!") + sized(b"x" * 300)
    decoder = FrameDecoder(1024)
    frames = []
    for i in range(len(data)):
        frames += decoder.feed(data[i : i + 1])
    assert frames == [b"hello", b"world!", b"x" * 300]


def test_partial_then_rest() -> None:
    decoder = FrameDecoder(1024)
    data = sized(b"first") + sized(b"second")
    assert decoder.feed(data[:7]) == []
    assert decoder.feed(data[7:]) == [b"first", b"second"]


@pytest.mark.parametrize("size", [-1, -(2**31), 1025, 2**31 - 1])
def test_size_prefix_out_of_bounds_is_refused_before_buffering(size: int) -> None:
    decoder = FrameDecoder(1024)
    with pytest.raises(FrameTooLarge):
        decoder.feed(struct.pack(">i", size))
    assert decoder.buffered_bytes == 0


def test_oversized_after_buffered_prefix() -> None:
    decoder = FrameDecoder(10)
    assert decoder.feed(sized(b"ok")[:3]) == []
    assert decoder.feed(sized(b"ok")[3:]) == [b"ok"]
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"\x00\x00" + b"\x00\x0b")


def test_frame_prefixes_total_size() -> None:
    assert b"".join(frame([b"ab", b"cde"])) == sized(b"abcde")
