"""CreateAcls (key 30): store ACLs in the metadata log (needs ALTER on the cluster, checked by dispatch).

Forwarded to the active controller, which validates each ACL (a concrete resource type, LITERAL or PREFIXED,
a concrete operation, ALLOW or DENY, a TYPE:NAME principal) and commits the valid ones in one entry; each
creation gets its own result, INVALID_REQUEST with the reason for a refused one. Creating an ACL that exists is
a success that stores nothing. Without an authorizer every creation is refused with SECURITY_DISABLED, as Kafka
does: ACLs nobody enforces would give a false sense of safety.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


def binding(resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str, operation: int,
            permission: int) -> AclBinding:
    """An AclBinding from wire codes. Raises KafkaError(INVALID_REQUEST) for a code Kafka does not define."""
    try:
        return AclBinding(ResourceType(resource_type), resource_name, PatternType(pattern_type), principal, host,
                          AclOperation(operation), AclPermissionType(permission))
    except ValueError as exc:
        raise KafkaError(ErrorCode.invalid_request, str(exc)) from exc


def security_disabled(ctx: RequestContext) -> bool:
    return not ctx.broker.config.authorizer_class_name


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = ctx.nested("AclCreationResult")
    if security_disabled(ctx):
        result = make(cls, error_code=ErrorCode.security_disabled, error_message="no authorizer is configured")
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE,
                    results=tuple(result for _ in request.creations))
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        result = make(cls, error_code=ErrorCode.cluster_authorization_failed,
                      error_message=f"{ctx.principal} may not ALTER the cluster")
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE,
                    results=tuple(result for _ in request.creations))
    forwarded = await ctx.broker.forward_to_controller(ctx, request)
    if forwarded is not None:
        return forwarded
    parsed: list[AclBinding | KafkaError] = []
    for c in request.creations:
        try:
            parsed.append(binding(c.resource_type, c.resource_name, getattr(c, "resource_pattern_type", 3),
                                  c.principal, c.host, c.operation, c.permission_type))
        except KafkaError as exc:
            parsed.append(exc)
    valid = [p for p in parsed if isinstance(p, AclBinding)]
    try:
        outcomes = iter(await ctx.broker.controller.create_acls(valid))
    except KafkaError as exc:
        outcomes = iter([exc] * len(valid))
    results = []
    for item in parsed:
        error = item if isinstance(item, KafkaError) else next(outcomes)
        results.append(make(cls, error_code=error.code if error else ErrorCode.none,
                            error_message=error.message if error else None))
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, results=tuple(results))


API = Api(key=30, name="CreateAcls", min_version=1, max_version=3, handle=handle)
