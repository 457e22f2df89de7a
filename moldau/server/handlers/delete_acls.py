"""DeleteAcls (key 31): remove the ACLs matching each filter (needs ALTER on the cluster: `acl_changes`).

Forwarded to the active controller, which removes every ACL any filter matches in one entry; each filter's
result lists the ACLs it matched (an ACL matched by two filters is listed by both, as in Kafka). Filters follow
DescribeAcls (ANY, MATCH, null name/principal/host); an invalid one is INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclBinding, AclBindingFilter
from moldau.server.context import RequestContext
from moldau.server.handlers.acl_changes import apply_valid, change_refusal, parse_each
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE
from moldau.server.handlers.describe_acls import acl_filter


async def handle(ctx: RequestContext, request: Any) -> Any:
    result_cls = ctx.nested("DeleteAclsFilterResult")
    refusal = change_refusal(ctx)
    if refusal is not None:
        result = make(result_cls, error_code=refusal.code, error_message=refusal.message, matching_acls=())
        return _response(ctx, tuple(result for _ in request.filters))
    forwarded = await ctx.broker.forward_to_controller(ctx, request)
    if forwarded is not None:
        return forwarded
    parsed = parse_each(request.filters, _filter_of)
    valid = [p for p in parsed if isinstance(p, AclBindingFilter)]
    results = []
    for outcome in await apply_valid(parsed, valid, ctx.broker.controller.delete_acls):
        if isinstance(outcome, KafkaError):
            results.append(make(result_cls, error_code=outcome.code, error_message=outcome.message,
                                matching_acls=()))
        else:
            results.append(make(result_cls, error_code=ErrorCode.none, error_message=None,
                                matching_acls=tuple(_matching(ctx, acl) for acl in outcome)))
    return _response(ctx, tuple(results))


def _filter_of(f: Any) -> AclBindingFilter:
    return acl_filter(f.resource_type_filter, f.resource_name_filter, getattr(f, "pattern_type_filter", 3),
                      f.principal_filter, f.host_filter, f.operation, f.permission_type)


def _matching(ctx: RequestContext, acl: AclBinding) -> Any:
    return make(ctx.nested("DeleteAclsMatchingAcl"), error_code=ErrorCode.none, error_message=None,
                resource_type=acl.resource_type, resource_name=acl.resource_name, pattern_type=acl.pattern_type,
                principal=acl.principal, host=acl.host, operation=acl.operation, permission_type=acl.permission)


def _response(ctx: RequestContext, results: tuple[Any, ...]) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, filter_results=results)


API = Api(key=31, name="DeleteAcls", min_version=1, max_version=3, handle=handle)
