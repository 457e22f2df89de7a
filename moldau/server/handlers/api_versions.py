"""ApiVersions (key 18): which APIs and versions this broker serves.

An unsupported ApiVersions version is answered by the dispatcher with a v0 response carrying
UNSUPPORTED_VERSION and the supported ranges (KIP-511), so a newer client retries with a version we know.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kio.schema.api_versions.v0.response as v0

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE

SHARE_GROUP_HEARTBEAT_KEY = 76
FEATURES = {"share.version": 1}
FEATURES_EPOCH = 0  # the feature levels never change: they are those of this code


async def handle(ctx: RequestContext, request: Any) -> Any:
    from moldau.server.handlers.registry import APIS, CONTROLLER_APIS

    apis = CONTROLLER_APIS if ctx.on_controller_listener else APIS
    api_version = ctx.nested("ApiVersion")
    keys = tuple(make(api_version, api_key=a.key, min_version=a.min_version, max_version=a.max_version)
                 for a in sorted(apis.values(), key=lambda a: a.key))
    supported, finalized = _features(ctx, apis)
    return make(ctx.schema.response_type, error_code=ErrorCode.none, api_keys=keys, throttle_time=NO_THROTTLE,
                supported_features=supported, finalized_features_epoch=FEATURES_EPOCH if finalized else -1,
                finalized_features=finalized, zk_migration_ready=False)


def _features(ctx: RequestContext, apis: Mapping[int, Api]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The feature levels served (v3+): `share.version` 1 where the share group APIs are, which is what tells
    clients share groups (KIP-932) are enabled."""
    if ctx.version < 3 or SHARE_GROUP_HEARTBEAT_KEY not in apis:
        return (), ()
    supported = tuple(make(ctx.nested("SupportedFeatureKey"), name=name, min_version=level, max_version=level)
                      for name, level in FEATURES.items())
    finalized = tuple(make(ctx.nested("FinalizedFeatureKey"), name=name, max_version_level=level,
                           min_version_level=level) for name, level in FEATURES.items())
    return supported, finalized


def unsupported_version_response(apis: Mapping[int, Api]) -> Any:
    keys = tuple(make(v0.ApiVersion, api_key=a.key, min_version=a.min_version, max_version=a.max_version)
                 for a in sorted(apis.values(), key=lambda a: a.key))
    return make(v0.ApiVersionsResponse, error_code=ErrorCode.unsupported_version, api_keys=keys)


API = Api(key=18, name="ApiVersions", min_version=0, max_version=4, handle=handle)
