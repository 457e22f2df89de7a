"""DescribeCluster (key 60): the cluster id, the controller and the brokers with their endpoints (KIP-700).

From v1 the client says which kind of endpoints it wants (KIP-919): 1 for brokers, 2 for controllers. Broker
listeners serve broker endpoints and controller listeners controller endpoints (the quorum voters); asking a
listener for the other kind gets MISMATCHED_ENDPOINT_TYPE, as from Kafka, and an unknown type
UNSUPPORTED_ENDPOINT_TYPE. Fenced brokers are left out unless a v2 request asks for them (KIP-1073).

The cluster's authorized operations (KIP-430) come from the ACLs when asked for and an authorizer is configured;
otherwise they are reported as omitted. DESCRIBE on the cluster is checked by dispatch.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import CLUSTER_NAME, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, requested_operations

ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS = 1, 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    endpoint_type = getattr(request, "endpoint_type", ENDPOINT_BROKERS)
    if endpoint_type not in (ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS):
        return _error(ctx, ErrorCode.unsupported_endpoint_type, f"unknown endpoint type {endpoint_type}")
    if (endpoint_type == ENDPOINT_CONTROLLERS) != ctx.on_controller_listener:
        wanted = "controller" if endpoint_type == ENDPOINT_CONTROLLERS else "broker"
        return _error(ctx, ErrorCode.mismatched_endpoint_type, f"this listener does not serve {wanted} endpoints")
    if endpoint_type == ENDPOINT_CONTROLLERS:
        return _response(ctx, ErrorCode.none, None, _controllers(ctx), endpoint_type, request)
    return _response(ctx, ErrorCode.none, None, _brokers(ctx, getattr(request, "include_fenced_brokers", False)),
                     request=request)


def _brokers(ctx: RequestContext, include_fenced: bool) -> tuple[Any, ...]:
    cls = ctx.nested("DescribeClusterBroker")
    out = []
    for broker_id, registration in sorted(ctx.broker.image.brokers.items()):
        endpoint = ctx.broker.endpoint_for(registration, ctx.listener)
        # A broker without an endpoint on this listener cannot be reached by the client; Kafka leaves it out.
        if endpoint is not None and (include_fenced or not registration.fenced):
            out.append(make(cls, broker_id=broker_id, host=endpoint.host, port=endpoint.port,
                            rack=registration.rack, is_fenced=registration.fenced))
    return tuple(out)


def _controllers(ctx: RequestContext) -> tuple[Any, ...]:
    """The quorum voters and their controller listeners (KIP-919, for admin clients bootstrapping on those)."""
    cls = ctx.nested("DescribeClusterBroker")
    return tuple(make(cls, broker_id=v.node_id, host=v.host, port=v.port, rack=None, is_fenced=False)
                 for v in sorted(ctx.broker.quorum.voters.values(), key=lambda v: v.node_id) if v.port > 0)


def _error(ctx: RequestContext, code: ErrorCode, message: str) -> Any:
    return _response(ctx, code, message, ())


def _response(ctx: RequestContext, code: ErrorCode, message: str | None, brokers: tuple[Any, ...],
              endpoint_type: int = ENDPOINT_BROKERS, request: Any = None) -> Any:
    # Clients send admin requests to the controller id; every broker forwards them, so this broker will do.
    controller_id = ctx.broker.quorum.leader_id if endpoint_type == ENDPOINT_CONTROLLERS else ctx.broker.node_id
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                endpoint_type=endpoint_type, cluster_id=ctx.broker.cluster_id,
                controller_id=controller_id if code == ErrorCode.none and controller_id is not None else -1,
                brokers=brokers,
                cluster_authorized_operations=requested_operations(
                    ctx, request, "include_cluster_authorized_operations", ResourceType.CLUSTER, CLUSTER_NAME))




API = Api(key=60, name="DescribeCluster", min_version=0, max_version=2, handle=handle)
