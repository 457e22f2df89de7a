"""IncrementalAlterConfigs (key 44): change some dynamic configs of topics and brokers (KIP-339).

Each config names an operation: SET (0) a value, DELETE (1) the override so the default applies again, or
APPEND (2) / SUBTRACT (3) items of a list config such as `cleanup.policy` (INVALID_CONFIG on other configs).
Configs the request does not name keep their values; that is the difference from the legacy AlterConfigs,
which replaces the whole set. Resources are topics (type 2), brokers (type 4), client metrics subscriptions
(type 16, KIP-714; setting a config of a new name creates the subscription, deleting its last one removes it)
and groups (type 32); a broker resource named "" holds the cluster-wide defaults, one named by a broker id that
broker's own values. A group's configs are checked against the broker's group.*.min/max bounds and take effect
in the group without a restart.

Each resource succeeds or fails as a whole, with its own error: UNKNOWN_TOPIC_OR_PARTITION for a missing
topic, INVALID_CONFIG for an unknown name or a bad value (the message says which), INVALID_REQUEST for an
unsupported resource type, a null value for an operation that needs one, or a resource or config named twice.
`validate_only` checks everything and changes nothing. Changes are committed to the metadata log, so they
survive restarts, and take effect on the partitions' logs as soon as they are applied.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from moldau.metadata.controller import OP_DELETE
from moldau.metadata.records import RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation
from moldau.security.acl.rules import config_refusal
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, forward_authorized
from moldau.server.listener_tls import touches_tls
from moldau.telemetry.configs import RESOURCE_CLIENT_METRICS

Change = tuple[str, int, str | None]
ChangesOf = Callable[[Any], list[Change]]


async def handle(ctx: RequestContext, request: Any) -> Any:
    refusals = alter_refusals(ctx, request.resources)
    refusals |= store_refusals(ctx, request.resources, _changes, replace_all=False, refusals=refusals)
    forwarded = await forward_authorized(ctx, request, "resources", "responses", refusals)
    if forwarded is not None:
        reload_stores_after_forward(ctx, request, _changes)
        return forwarded
    responses = await alter_resources(ctx, request.resources, _changes, request.validate_only, replace_all=False,
                                      refusals=refusals)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, responses=responses)


def _changes(resource: Any) -> list[Change]:
    changes = [(c.name, c.config_operation, c.value) for c in resource.configs]
    for name, op, value in changes:
        if value is None and op != OP_DELETE:
            raise KafkaError(ErrorCode.invalid_request, f"null value not supported for '{name}'")
    return changes


def store_refusals(ctx: RequestContext, resources: Sequence[Any], changes_of: ChangesOf, replace_all: bool,
                   refusals: dict[int, Any]) -> dict[int, Any]:
    """The broker resources that change a listener's key or trust stores and cannot be taken, answered here, before
    the request is forwarded to the controller: only the broker a per-broker change names can load the files it
    names, so such a change must be sent to that broker (Kafka refuses every per-broker change sent to another
    one: INVALID_REQUEST "Unexpected broker id"), which loads them and checks them against its listeners'
    current stores (`moldau.server.listener_tls`)."""
    out: dict[int, Any] = {}
    if ctx.on_controller_listener:
        return out  # forwarded by the broker the client sent it to, which checked its own stores
    for i, resource in enumerate(resources):
        if i in refusals or resource.resource_type != RESOURCE_BROKER:
            continue
        try:
            changes = changes_of(resource)
            if not touches_tls(name for name, _, _ in changes):
                continue
            name = resource.resource_name
            if name and name != str(ctx.broker.node_id):
                raise KafkaError(ErrorCode.invalid_request, f"Unexpected broker id, expected {ctx.broker.node_id}, "
                                 f"but received {name} (a broker's key and trust stores are changed through that "
                                 "broker, which loads them first)")
            ctx.broker.listener_tls.check(name, changes, replace_all)
        except KafkaError as exc:
            out[i] = _response(ctx, resource, exc.code, exc.message)
    return out


def reload_stores_after_forward(ctx: RequestContext, request: Any, changes_of: ChangesOf) -> None:
    """After the controller took a change of this broker's stores: load them now, also files named again under the
    same name (a certificate renewed in place), which change nothing in the metadata for this broker to follow.
    The forward returns once this node has applied the controller's change."""
    if request.validate_only or ctx.on_controller_listener:
        return
    for resource in request.resources:
        if resource.resource_type == RESOURCE_BROKER and resource.resource_name in ("", str(ctx.broker.node_id)):
            try:
                if touches_tls(name for name, _, _ in changes_of(resource)):
                    ctx.broker.listener_tls.after_alter()
                    return
            except KafkaError:
                continue


def alter_refusals(ctx: RequestContext, resources: Sequence[Any]) -> dict[int, Any]:
    """The resources this principal may not ALTER_CONFIGS (topic, or the cluster for brokers), answered."""
    refusals = {}
    for i, resource in enumerate(resources):
        code = config_refusal(ctx, resource.resource_type, resource.resource_name, AclOperation.ALTER_CONFIGS)
        if code is not None:
            refusals[i] = _response(ctx, resource, code, f"{ctx.principal} may not alter these configs")
    return refusals


async def alter_resources(ctx: RequestContext, resources: Sequence[Any], changes_of: ChangesOf, validate_only: bool,
                    replace_all: bool, refusals: dict[int, Any] | None = None) -> tuple[Any, ...]:
    """One response per resource; shared with the legacy AlterConfigs, whose responses look the same."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    out = []
    for i, resource in enumerate(resources):
        if refusals and i in refusals:
            out.append(refusals[i])
            continue
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                raise KafkaError(ErrorCode.invalid_request, "resource named more than once in the request")
            await _alter(ctx, resource, changes_of(resource), validate_only, replace_all)
        except KafkaError as exc:
            out.append(_response(ctx, resource, exc.code, exc.message))
        else:
            out.append(_response(ctx, resource, ErrorCode.none, None))
    return tuple(out)


async def _alter(ctx: RequestContext, resource: Any, changes: list[Change], validate_only: bool,
           replace_all: bool) -> None:
    if resource.resource_type not in (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP):
        raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {resource.resource_type}")
    # Kafka refuses the whole resource rather than apply one of two conflicting changes.
    duplicates = sorted(name for name, count in Counter(name for name, _, _ in changes).items() if count > 1)
    if duplicates:
        raise KafkaError(ErrorCode.invalid_request, f"configs named more than once: {', '.join(duplicates)}")
    # A listener's key or trust store was loaded and checked by the broker the client sent it to (store_refusals).
    stores = resource.resource_type == RESOURCE_BROKER and touches_tls(name for name, _, _ in changes)
    await ctx.broker.controller.alter_configs(resource.resource_type, resource.resource_name, changes,
                                              validate_only, replace_all)
    if stores and not validate_only:
        ctx.broker.listener_tls.after_alter()


def _response(ctx: RequestContext, resource: Any, code: ErrorCode, message: str | None) -> Any:
    return make(ctx.nested("AlterConfigsResourceResponse"), error_code=code, error_message=message,
                resource_type=resource.resource_type, resource_name=resource.resource_name)


API = Api(key=44, name="IncrementalAlterConfigs", min_version=0, max_version=1, handle=handle)
