"""A direct parser for HeartbeatRequest and a direct encoder for its response (v0-v4).

Every member of a classic group sends one every few seconds, so the generic path's per-field cost is paid per
heartbeat (see `offset_commit` for why). As there, the parser reads the common request and returns None for
anything else (tagged fields, a malformed body), which the caller decodes with kio. Checked against kio for every
version (`tests/unit/protocol/test_heartbeat_codec.py`).

Layout: group id, generation id, member id, group instance id (v3+); the response: throttle time (v1+) and error
code. v4 is flexible.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from moldau.protocol.codec import DirectBody, InvalidRequest
from moldau.protocol.request_reader import RequestReader
from moldau.protocol.wire import I16, I32, ResponsePart

FIRST_FLEXIBLE_VERSION = 4
_THROTTLE_ERROR = struct.Struct(">ih")



@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


def parse_heartbeat_request(frame: bytes | memoryview, pos: int, version: int) -> HeartbeatRequest | None:
    """The body starting at `pos`, or None when it is not one this parser reads (decode it with kio then)."""
    reader = RequestReader(memoryview(frame), pos, flexible=version >= FIRST_FLEXIBLE_VERSION)
    try:
        group_id = reader.string()
        (generation,) = reader.fixed(I32)
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        reader.expect_no_tags()
        reader.expect_end()
    except (InvalidRequest, struct.error, IndexError, UnicodeDecodeError, ValueError):
        return None
    return HeartbeatRequest(group_id, generation, member_id, instance_id)


@dataclass(slots=True)
class HeartbeatResponse(DirectBody):
    throttle_time_ms: int
    error_code: int

    def encode(self, version: int) -> list[ResponsePart]:
        if version == 0:
            return [I16.pack(self.error_code)]
        body = _THROTTLE_ERROR.pack(self.throttle_time_ms, self.error_code)
        return [body + b"\x00" if version >= FIRST_FLEXIBLE_VERSION else body]
