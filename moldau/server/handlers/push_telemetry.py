"""PushTelemetry (key 72): a client's metrics, an OTLP MetricsData protobuf, possibly compressed (KIP-714).

Checked as Kafka checks them: a null or zero instance id is INVALID_REQUEST, an instance or subscription id the
broker did not hand out (or one the subscriptions have since changed) UNKNOWN_SUBSCRIPTION_ID, a push after the
client's terminating one INVALID_REQUEST, one sooner than half the push interval after the last
THROTTLING_QUOTA_EXCEEDED, one over `telemetry.max.bytes` TELEMETRY_TOO_LARGE, an unknown codec
UNSUPPORTED_COMPRESSION_TYPE and a payload that does not decode INVALID_RECORD. An accepted push replaces the
instance's latest one in memory (`moldau.telemetry.clients`); `moldau client-metrics` shows it.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    try:
        ctx.broker.client_telemetry.push(request.client_instance_id, request.subscription_id, request.terminating,
                                         request.compression_type, request.metrics, ctx.broker.image.configs)
    except KafkaError as exc:
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=exc.code)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none)


API = Api(key=72, name="PushTelemetry", min_version=0, max_version=0, handle=handle)
