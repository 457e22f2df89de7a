"""FindCoordinator (key 10): which broker coordinates a group (or a transactional id).

Group keys (key type 0) are placed on a partition of `__consumer_offsets`, transactional ids (key type 1) on a
partition of `__transaction_state`; the first lookup creates the topic, and the coordinator is the leader of the
key's partition. From v4 one request looks up many keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, error_message

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


@dataclass(frozen=True, slots=True)
class _Found:
    key: str
    error: ErrorCode
    message: str | None = None
    node_id: int = -1
    host: str = ""
    port: int = -1


async def handle(ctx: RequestContext, request: Any) -> Any:
    key_type = getattr(request, "key_type", KEY_TYPE_GROUP)
    # The first lookup creates the internal topic; waiting for it here answers in one round trip.
    if key_type == KEY_TYPE_GROUP:
        await ctx.broker.ensure_offsets_topic()
    elif key_type == KEY_TYPE_TRANSACTION:
        await ctx.broker.ensure_transaction_topic()
    if ctx.version < 4:
        found = _find(ctx, request.key, key_type)
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=found.error,
                    error_message=error_message(found.error.name, found.message), node_id=found.node_id,
                    host=found.host, port=found.port)
    cls = ctx.nested("Coordinator")
    coordinators = tuple(
        make(cls, key=f.key, node_id=f.node_id, host=f.host, port=f.port, error_code=f.error,
             error_message=error_message(f.error.name, f.message))
        for f in (_find(ctx, key, key_type) for key in request.coordinator_keys)
    )
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, coordinators=coordinators)


def _find(ctx: RequestContext, key: str, key_type: int) -> _Found:
    if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        return _Found(key, ErrorCode.invalid_request, f"unknown key type {key_type}")
    resource_type = ResourceType.GROUP if key_type == KEY_TYPE_GROUP else ResourceType.TRANSACTIONAL_ID
    if not ctx.authorize(AclOperation.DESCRIBE, resource_type, key):
        code = (ErrorCode.group_authorization_failed if key_type == KEY_TYPE_GROUP
                else ErrorCode.transactional_id_authorization_failed)
        return _Found(key, code, f"{ctx.principal} may not DESCRIBE {resource_type.name} {key}")
    broker = ctx.broker
    coordinator = broker.groups.coordinator if key_type == KEY_TYPE_GROUP else broker.txn.coordinator
    try:
        node_id = coordinator.coordinator_node(key)
    except KafkaError as exc:
        return _Found(key, exc.code, exc.message)
    registration = broker.image.brokers.get(node_id)
    endpoint = broker.endpoint_for(registration, ctx.listener) if registration is not None else None
    if endpoint is None:
        return _Found(key, ErrorCode.coordinator_not_available, f"broker {node_id} has no endpoint")
    return _Found(key, ErrorCode.none, None, node_id, endpoint.host, endpoint.port)


API = Api(key=10, name="FindCoordinator", min_version=0, max_version=6, handle=handle)
