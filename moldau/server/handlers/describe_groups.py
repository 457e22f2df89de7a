"""DescribeGroups (key 15): state, protocol and members of groups.

Member metadata and assignments are only shown for a Stable group, as Kafka does. A group that does not
exist is reported as state "Dead" before v6, and with GROUP_ID_NOT_FOUND from v6 (KIP-1043).
"""

from __future__ import annotations

from typing import Any

from moldau.coordinator.group.classic import GroupDescription
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import AUTHORIZED_OPERATIONS_OMITTED, NO_THROTTLE, requested_operations

NOT_FOUND_ERROR_FROM = 6
_DEAD = GroupDescription("Dead", "", "", ())


async def handle(ctx: RequestContext, request: Any) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE,
                groups=tuple(_describe(ctx, request, group_id) for group_id in request.groups))


def _describe(ctx: RequestContext, request: Any, group_id: str) -> Any:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return make(ctx.nested("DescribedGroup"), error_code=ErrorCode.group_authorization_failed,
                    error_message=f"{ctx.principal} may not DESCRIBE group {group_id}", group_id=group_id,
                    group_state="", protocol_type="", protocol_data="", members=(),
                    authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
    group = ctx.broker.groups.coordinator.find_group(group_id)
    error, message = ErrorCode.none, None
    if group is None and ctx.version >= NOT_FOUND_ERROR_FROM:
        error, message = ErrorCode.group_id_not_found, f"group {group_id} not found"
    description = group.describe() if group is not None else _DEAD
    member_cls = ctx.nested("DescribedGroupMember")
    members = tuple(
        make(member_cls, member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
             client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
        for m in description.members
    )
    return make(ctx.nested("DescribedGroup"), error_code=error, error_message=message, group_id=group_id,
                group_state=description.state, protocol_type=description.protocol_type,
                protocol_data=description.protocol_name, members=members,
                authorized_operations=requested_operations(ctx, request, "include_authorized_operations",
                                                           ResourceType.GROUP, group_id))




API = Api(key=15, name="DescribeGroups", min_version=0, max_version=6, handle=handle)
