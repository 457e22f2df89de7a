"""LeaveGroup (key 13): members leave a group, which then rebalances without them.

Up to v2 one member leaves by member id. From v3 a batch of members leave, each named by member id or by group
instance id (KIP-345: static members are removed by their instance id, e.g. by an administrator), and each
gets its own error code.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.version < 3:
        identities: list[tuple[str, str | None]] = [(request.member_id, None)]
    else:
        identities = [(m.member_id, m.group_instance_id) for m in request.members]
    member_errors: tuple[ErrorCode, ...] = ()
    if not request.group_id:
        error = ErrorCode.invalid_group_id
    else:
        error, member_errors = ctx.broker.groups.leave(request.group_id, identities)
    if ctx.version < 3:
        # One member: its error is the request's.
        if error == ErrorCode.none and member_errors:
            error = member_errors[0]
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=error)
    cls = ctx.nested("MemberResponse")
    # A request-level error (unknown coordinator, invalid group id) leaves no per-member answers.
    answered = list(zip(identities, member_errors, strict=True)) if member_errors else []
    members = tuple(make(cls, member_id=member_id, group_instance_id=instance_id, error_code=code)
                    for (member_id, instance_id), code in answered)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=error, members=members)


API = Api(key=13, name="LeaveGroup", min_version=0, max_version=5, handle=handle)
