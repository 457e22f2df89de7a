"""The bytes of an encoded response, for tests that compare or decode them."""

from __future__ import annotations

from collections.abc import Iterable

from moldau.protocol.wire import FileRegion, ResponsePart


def in_memory(parts: Iterable[ResponsePart]) -> bytes:
    """The parts joined; only a response for a connection that sends files holds file regions, so one here is
    a failure."""
    out = bytearray()
    for part in parts:
        if isinstance(part, FileRegion):
            raise AssertionError(f"a file region ({part}) where the response should hold its bytes")
        out += part
    return bytes(out)
