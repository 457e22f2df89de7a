"""UpdateFeatures (key 57): finalize feature levels, such as `metadata.version` or `group.version` (KIP-584).

Each update names a feature, the level to finalize (0 turns it off) and, from v1, whether it is an upgrade, a
safe downgrade or an unsafe downgrade (v0's `allow_downgrade` is a safe downgrade). The active controller checks
them as Kafka's does (`moldau.metadata.features`) and commits them all in one entry of the metadata log, or none:
an invalid one fails the whole request with INVALID_UPDATE_VERSION. `validate_only` (v1+) checks and changes
nothing. Needs ALTER on the cluster. The finalized levels are then in every ApiVersions response (v3+), which is
also how clients describe features (Admin.describeFeatures).

v0 and v1 responses carry a result per feature, each with the request's error; v2 only the request's error.
"""

from __future__ import annotations

from typing import Any

from moldau.metadata.features import SAFE_DOWNGRADE, UPGRADE
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _response(ctx, request, ErrorCode.cluster_authorization_failed,
                         f"{ctx.principal} may not ALTER the cluster")
    forwarded = await ctx.broker.forward_to_controller(ctx, request)
    if forwarded is not None:
        return forwarded
    updates = [(u.feature, int(u.max_version_level), _upgrade_type(u)) for u in request.feature_updates]
    try:
        await ctx.broker.controller.update_features(updates, getattr(request, "validate_only", False))
    except KafkaError as exc:
        return _response(ctx, request, exc.code, exc.message)
    return _response(ctx, request, ErrorCode.none, None)


def _upgrade_type(update: Any) -> int:
    if hasattr(update, "upgrade_type"):
        return int(update.upgrade_type)
    return SAFE_DOWNGRADE if update.allow_downgrade else UPGRADE


def _response(ctx: RequestContext, request: Any, code: ErrorCode, message: str | None) -> Any:
    results = () if ctx.version >= 2 else tuple(
        make(ctx.nested("UpdatableFeatureResult"), feature=u.feature, error_code=code, error_message=message)
        for u in request.feature_updates)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                results=results)


API = Api(key=57, name="UpdateFeatures", min_version=0, max_version=2, handle=handle)
