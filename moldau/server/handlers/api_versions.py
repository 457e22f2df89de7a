"""ApiVersions (key 18): which APIs and versions this broker serves, and its features (KIP-584).

The ranges are Kafka 4.2's, capped where Moldau implements less (docs/protocol.md). From v3 the response
also carries the supported feature ranges and the cluster's finalized levels (`moldau.metadata.features`);
an API a feature turns on (KIP-848's consumer groups with `group.version`, share groups with `share.version`)
is advertised (and served: `moldau.server.feature_gate`) only while that feature's level is above 0. Admin
clients' describeFeatures reads these.

An unsupported ApiVersions version is answered by the dispatcher with a v0 response carrying
UNSUPPORTED_VERSION and the supported ranges (KIP-511), so a newer client retries with a version we know.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kio.schema.api_versions.v0.response as v0

from moldau.metadata.features import SUPPORTED, finalized, turned_off_apis
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE

_FIRST_VERSION_WITH_ZERO_MIN_LEVEL = 4  # KIP-1022: v3 clients reject a supported min level of 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    from moldau.server.handlers.registry import APIS, CONTROLLER_APIS

    if ctx.version >= 3:  # the client's software, for client metrics subscriptions that match on it (KIP-714)
        ctx.broker.client_telemetry.note_software(ctx.peer, request.client_software_name,
                                                  request.client_software_version)
    levels = finalized(ctx.broker.image.features)
    off = {**turned_off_apis(ctx.broker.image.features), **ctx.broker.config_turned_off_apis}
    apis = {key: api for key, api in (CONTROLLER_APIS if ctx.on_controller_listener else APIS).items()
            if key not in off}
    api_version = ctx.nested("ApiVersion")
    keys = tuple(make(api_version, api_key=a.key, min_version=a.min_version, max_version=a.max_version)
                 for a in sorted(apis.values(), key=lambda a: a.key))
    supported, final = _features(ctx, levels)
    return make(ctx.schema.response_type, error_code=ErrorCode.none, api_keys=keys, throttle_time=NO_THROTTLE,
                supported_features=supported, finalized_features_epoch=max(ctx.broker.image.offset, 0) if final else -1,
                finalized_features=final, zk_migration_ready=False)


def _features(ctx: RequestContext, levels: Mapping[str, int]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Supported ranges and finalized levels (v3+), as Kafka reports them: a feature whose supported max is 0
    is left out, v3 reports a supported min of 0 as 1 (KIP-1022), and only levels above 0 are finalized."""
    if ctx.version < 3:
        return (), ()
    zero_min = ctx.version >= _FIRST_VERSION_WITH_ZERO_MIN_LEVEL
    supported = tuple(make(ctx.nested("SupportedFeatureKey"), name=f.name,
                           min_version=f.min_level if zero_min else max(1, f.min_level), max_version=f.max_level)
                      for f in SUPPORTED.values() if f.max_level > 0)
    final = tuple(make(ctx.nested("FinalizedFeatureKey"), name=name, max_version_level=level,
                       min_version_level=level) for name, level in levels.items() if level > 0)
    return supported, final


def unsupported_version_response(apis: Mapping[int, Api]) -> Any:
    keys = tuple(make(v0.ApiVersion, api_key=a.key, min_version=a.min_version, max_version=a.max_version)
                 for a in sorted(apis.values(), key=lambda a: a.key))
    return make(v0.ApiVersionsResponse, error_code=ErrorCode.unsupported_version, api_keys=keys)


API = Api(key=18, name="ApiVersions", min_version=0, max_version=4, handle=handle)
