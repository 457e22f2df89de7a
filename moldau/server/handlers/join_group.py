"""JoinGroup (key 11): join a classic group, or rejoin it for a rebalance.

The response waits until the group completes the join phase (all members rejoined, or the rebalance timeout
expired), so this handler awaits the group runtime. From v4 a member without an id first gets
MEMBER_ID_REQUIRED with its new id (KIP-394); from v5 `group_instance_id` makes the member static (KIP-345);
from v9 a static leader rejoining without a rebalance is told to skip the assignment (KIP-814), which older
versions express by not listing the members.

A share group's id gets INCONSISTENT_GROUP_PROTOCOL (`GroupShard.join`), as Kafka answers a JoinGroup for a group of
another type.
"""

from __future__ import annotations

from typing import Any

from moldau.coordinator.group.member import JoinRequest, JoinResult, ProtocolMetadata
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, ms_from_timedelta


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not request.group_id:
        return _response(ctx, JoinResult(ErrorCode.invalid_group_id, request.member_id))
    session_ms = ms_from_timedelta(request.session_timeout)
    # v0 had a single timeout for the session and the rebalance.
    rebalance_ms = ms_from_timedelta(request.rebalance_timeout) if ctx.version >= 1 else session_ms
    join = JoinRequest(
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.header.client_id or "",
        client_host=client_host(ctx.peer),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=request.protocol_type,
        protocols=tuple(ProtocolMetadata(p.name, bytes(p.metadata)) for p in request.protocols),
        require_known_member_id=ctx.version >= 4,
    )
    return _response(ctx, await ctx.broker.groups.join(request.group_id, join))


def client_host(peer: str) -> str:
    """Kafka shows a member's host as Java prints an InetAddress: '/' and the IP."""
    host = peer.rpartition(":")[0] or peer
    return "/" + host.strip("[]")


def _response(ctx: RequestContext, result: JoinResult) -> Any:
    members = result.members if ctx.version >= 9 or not result.skip_assignment else ()
    member_cls = ctx.nested("JoinGroupResponseMember")
    return make(
        ctx.schema.response_type,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        # Nullable from v7; before that an unknown protocol is "".
        protocol_name=result.protocol_name if ctx.version >= 7 else result.protocol_name or "",
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(make(member_cls, member_id=m.member_id, group_instance_id=m.group_instance_id,
                           metadata=m.metadata) for m in members),
    )


API = Api(key=11, name="JoinGroup", min_version=0, max_version=9, handle=handle)
