"""Heartbeat (key 12): a member says it is alive; REBALANCE_IN_PROGRESS in the answer tells it to rejoin.

Read and answered by the direct codec of `moldau.protocol.heartbeat` (kio decodes what it does not read)."""

from __future__ import annotations

from typing import Any

from moldau.protocol import codec
from moldau.protocol.errors import ErrorCode
from moldau.protocol.heartbeat import HeartbeatResponse, parse_heartbeat_request
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE_MS


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not request.group_id:
        error = ErrorCode.invalid_group_id
    else:
        error = ctx.broker.groups.heartbeat(request.group_id, request.member_id,
                                            getattr(request, "group_instance_id", None), request.generation_id)
    return HeartbeatResponse(NO_THROTTLE_MS, error)


def decode(frame: bytes | memoryview, pos: int, version: int) -> Any:
    """The direct parser's request; kio's for what it does not read (tagged fields, a malformed body)."""
    request = parse_heartbeat_request(frame, pos, version)
    return request if request is not None else codec.decode_body(codec.api_schema(API_KEY, version), frame, pos)


API_KEY = 12


API = Api(key=API_KEY, name="Heartbeat", min_version=0, max_version=4, handle=handle, decode=decode)
