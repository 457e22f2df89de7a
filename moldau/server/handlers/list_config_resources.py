"""ListConfigResources (key 74): the names of config resources (KIP-714, widened by KIP-1142).

v0 was ListClientMetricsResources: the client metrics subscriptions (CLIENT_METRICS resources, type 16). From v1
a request names the resource types it wants (none: every type): topics (2), brokers (4) and broker loggers (8)
by id, client metrics subscriptions (16) and groups with configs of their own (32). Another type is
INVALID_REQUEST. Needs DESCRIBE_CONFIGS on the cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moldau.metadata.image import MetadataImage
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE
from moldau.telemetry.subscriptions import RESOURCE_CLIENT_METRICS

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
_LISTERS: dict[int, Callable[[MetadataImage], list[str]]] = {
    TOPIC: lambda image: sorted(image.topics_by_name),
    BROKER: lambda image: [str(b) for b in sorted(image.brokers)],
    BROKER_LOGGER: lambda image: [str(b) for b in sorted(image.brokers)],
    RESOURCE_CLIENT_METRICS: lambda image: _configured(image, RESOURCE_CLIENT_METRICS),
    GROUP: lambda image: _configured(image, GROUP),
}


def _configured(image: MetadataImage, resource_type: int) -> list[str]:
    return sorted(name for (kind, name), values in image.configs.items() if kind == resource_type and values)


async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = [int(t) for t in getattr(request, "resource_types", (RESOURCE_CLIENT_METRICS,))] or sorted(_LISTERS)
    if ctx.version == 0:
        wanted = [RESOURCE_CLIENT_METRICS]
    unknown = [t for t in wanted if t not in _LISTERS]
    if unknown:
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_request,
                    config_resources=())
    cls = ctx.nested("ConfigResource")
    resources = tuple(make(cls, resource_name=name, resource_type=kind)
                      for kind in dict.fromkeys(wanted) for name in _LISTERS[kind](ctx.broker.image))
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                config_resources=resources)


API = Api(key=74, name="ListConfigResources", min_version=0, max_version=1, handle=handle)
