"""AlterClientQuotas (key 49): set or remove client quotas of users, client ids and their defaults (KIP-546).

Each entry names an entity (user and/or client-id; a null name is the type's default, `<default>`) and
operations, each setting a quota (`producer_byte_rate`, `consumer_byte_rate`, `request_percentage`,
`controller_mutation_rate`) or removing it. Entries succeed or fail on their own: INVALID_REQUEST for an
unsupported or repeated entity type, an unknown quota or a bad value (the message says which). `validate_only`
checks and changes nothing. Forwarded to the active controller, which commits the changes to the metadata log;
every broker then applies them from its image (`moldau.security.quotas`).
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        entity_cls, entry_cls = ctx.nested("EntityData"), ctx.nested("EntryData")
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, entries=tuple(
            make(entry_cls, error_code=ErrorCode.cluster_authorization_failed,
                 error_message=f"{ctx.principal} may not ALTER_CONFIGS the cluster",
                 entity=tuple(entity_cls(entity_type=e.entity_type, entity_name=e.entity_name)
                              for e in entry.entity))
            for entry in request.entries))
    forwarded = await ctx.broker.forward_to_controller(ctx, request)
    if forwarded is not None:
        return forwarded
    entries = [([(e.entity_type, e.entity_name) for e in entry.entity],
                [(op.key, None if op.remove else float(op.value)) for op in entry.ops])
               for entry in request.entries]
    errors = await ctx.broker.controller.alter_client_quotas(entries, request.validate_only)
    entity_cls, entry_cls = ctx.nested("EntityData"), ctx.nested("EntryData")
    out = []
    for entry, error in zip(request.entries, errors, strict=True):
        entity = tuple(entity_cls(entity_type=e.entity_type, entity_name=e.entity_name)
                       for e in entry.entity)
        out.append(make(entry_cls, error_code=error.code if error else ErrorCode.none,
                        error_message=error.message if error else None, entity=entity))
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, entries=tuple(out))


API = Api(key=49, name="AlterClientQuotas", min_version=0, max_version=1, handle=handle)
