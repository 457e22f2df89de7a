"""DescribeAcls (key 29): the ACLs matching a filter, grouped by resource (needs DESCRIBE on the cluster).

Answered from this node's metadata image, which every node replays from the same log. The filter follows Kafka:
ANY for types and pattern type, null for name, principal and host match everything; pattern type MATCH returns
the ACLs that apply to the named resource (literal, `*` and prefixes). An invalid filter is INVALID_REQUEST;
without an authorizer, SECURITY_DISABLED.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
)
from moldau.server.context import RequestContext
from moldau.server.handlers.acl_changes import security_disabled
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


def acl_filter(resource_type: int, name: str | None, pattern_type: int, principal: str | None, host: str | None,
               operation: int, permission: int) -> AclBindingFilter:
    """A filter from wire codes. Raises KafkaError(INVALID_REQUEST)."""
    try:
        result = AclBindingFilter(ResourceType(resource_type), name, PatternType(pattern_type), principal, host,
                                  AclOperation(operation), AclPermissionType(permission))
        result.validate()
    except (ValueError, InvalidAcl) as exc:
        raise KafkaError(ErrorCode.invalid_request, str(exc)) from exc
    return result


async def handle(ctx: RequestContext, request: Any) -> Any:
    if security_disabled(ctx):
        return _response(ctx, ErrorCode.security_disabled, "no authorizer is configured", ())
    try:
        wanted = acl_filter(request.resource_type_filter, request.resource_name_filter,
                            getattr(request, "pattern_type_filter", 3), request.principal_filter,
                            request.host_filter, request.operation, request.permission_type)
    except KafkaError as exc:
        return _response(ctx, exc.code, exc.message, ())
    by_resource: dict[tuple[int, str, int], list[AclBinding]] = {}
    for acl in ctx.broker.image.acls.values():
        if wanted.matches(acl):
            by_resource.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    description = ctx.nested("AclDescription")
    resource = ctx.nested("DescribeAclsResource")
    resources = tuple(
        make(resource, resource_type=rtype, resource_name=name, pattern_type=ptype, acls=tuple(
            make(description, principal=a.principal, host=a.host, operation=a.operation,
                 permission_type=a.permission)
            for a in sorted(acls, key=lambda a: (a.principal, a.host, a.operation, a.permission))))
        for (rtype, name, ptype), acls in sorted(by_resource.items())
    )
    return _response(ctx, ErrorCode.none, None, resources)


def _response(ctx: RequestContext, code: ErrorCode, message: str | None, resources: tuple[Any, ...]) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                resources=resources)


API = Api(key=29, name="DescribeAcls", min_version=1, max_version=3, handle=handle)
