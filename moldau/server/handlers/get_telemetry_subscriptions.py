"""GetTelemetrySubscriptions (key 71): which metrics a client should push, and how often (KIP-714).

A client without an instance id (null or zero) gets a new one. Its subscription combines every CLIENT_METRICS
config resource whose `match` selects it (`moldau.telemetry.subscriptions`): the metric name prefixes to push
(none: push nothing; a single empty string: every metric), the push interval, and a subscription id the
pushes must carry. The broker accepts zstd, lz4, gzip and snappy (preferred first), up to
`telemetry.max.bytes` a push, and asks for delta temporality, as Kafka does.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE
from moldau.telemetry.clients import ACCEPTED_COMPRESSION_TYPES


async def handle(ctx: RequestContext, request: Any) -> Any:
    instance = ctx.broker.client_telemetry.subscribe(request.client_instance_id, ctx.header.client_id, ctx.peer,
                                                     ctx.broker.image.configs)
    subscription = instance.subscription
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                client_instance_id=instance.instance_id, subscription_id=subscription.subscription_id,
                accepted_compression_types=ACCEPTED_COMPRESSION_TYPES,
                push_interval=timedelta(milliseconds=subscription.interval_ms),
                telemetry_max_bytes=ctx.broker.config.telemetry_max_bytes, delta_temporality=True,
                requested_metrics=subscription.metrics)


API = Api(key=71, name="GetTelemetrySubscriptions", min_version=0, max_version=0, handle=handle)
