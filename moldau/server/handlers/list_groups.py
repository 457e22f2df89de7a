"""ListGroups (key 16): the groups this broker coordinates.

v4 filters by state and v5 by group type ("classic", "consumer" or "share"); filters match case-insensitively
and an empty filter matches everything. Share groups (KIP-932) are listed with protocol type and group type
"share", as Kafka lists them.
"""

from __future__ import annotations

from typing import Any

from moldau.coordinator.group.coordinator import ListedGroup
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE

SHARE = "share"


async def handle(ctx: RequestContext, request: Any) -> Any:
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    cls = ctx.nested("ListedGroup")
    # DESCRIBE on the cluster lists every group; otherwise only the groups the principal may DESCRIBE.
    everything = ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
    groups = tuple(
        make(cls, group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state, group_type=g.group_type)
        for g in sorted(_all_groups(ctx), key=lambda g: g.group_id)
        if (not states or g.state.lower() in states) and (not types or g.group_type.lower() in types)
        and (everything or ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id))
    )
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=groups)


def _all_groups(ctx: RequestContext) -> list[ListedGroup]:
    share = [ListedGroup(g.group_id, SHARE, g.state, SHARE) for g in ctx.broker.share.list_groups()]
    return ctx.broker.groups.list_groups() + share


API = Api(key=16, name="ListGroups", min_version=0, max_version=5, handle=handle)
