"""DescribeCluster (key 60): the cluster id, the controller and the brokers with their endpoints (KIP-700).

From v1 the client says which kind of endpoints it wants (KIP-919): 1 for brokers, 2 for controllers. This
broker's listeners are broker endpoints, so a request for controllers gets MISMATCHED_ENDPOINT_TYPE, as a
Kafka broker answers, and an unknown type UNSUPPORTED_ENDPOINT_TYPE. From v2 a client may ask for fenced
brokers too (KIP-1073); a registered broker here is never fenced, so the flag changes nothing.

There is no authorizer, so the cluster's authorized operations are reported as omitted.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import AUTHORIZED_OPERATIONS_OMITTED, NO_THROTTLE

ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS = 1, 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    endpoint_type = getattr(request, "endpoint_type", ENDPOINT_BROKERS)
    if endpoint_type == ENDPOINT_CONTROLLERS:
        return _error(ctx, ErrorCode.mismatched_endpoint_type,
                      "this listener serves broker endpoints, not controller endpoints")
    if endpoint_type != ENDPOINT_BROKERS:
        return _error(ctx, ErrorCode.unsupported_endpoint_type, f"unknown endpoint type {endpoint_type}")
    return _response(ctx, ErrorCode.none, None, _brokers(ctx))


def _brokers(ctx: RequestContext) -> tuple[Any, ...]:
    cls = ctx.nested("DescribeClusterBroker")
    out = []
    for broker_id, registration in sorted(ctx.broker.image.brokers.items()):
        endpoint = ctx.broker.endpoint_for(registration)
        # A broker without an endpoint on this listener cannot be reached by the client; Kafka leaves it out.
        if endpoint is not None:
            out.append(make(cls, broker_id=broker_id, host=endpoint.host, port=endpoint.port,
                            rack=registration.rack, is_fenced=False))
    return tuple(out)


def _error(ctx: RequestContext, code: ErrorCode, message: str) -> Any:
    return _response(ctx, code, message, ())


def _response(ctx: RequestContext, code: ErrorCode, message: str | None, brokers: tuple[Any, ...]) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                endpoint_type=ENDPOINT_BROKERS, cluster_id=ctx.broker.cluster_id,
                controller_id=ctx.broker.node_id if code == ErrorCode.none else -1, brokers=brokers,
                cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


API = Api(key=60, name="DescribeCluster", min_version=0, max_version=2, handle=handle)
