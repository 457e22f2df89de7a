"""AlterConfigs (key 33): the legacy way to set the dynamic configs of topics and brokers.

Unlike IncrementalAlterConfigs, the configs in the request become the resource's complete set of dynamic
configs: every override the request leaves out is removed and falls back to its default. Clients that want
to change one config must describe the others first and send them all back; KIP-339 replaced this API for
that reason. Kafka refuses null values here (INVALID_REQUEST), since leaving a config out already removes it.

Resources, per-resource errors and `validate_only` work as in IncrementalAlterConfigs.
"""

from __future__ import annotations

from typing import Any

from moldau.metadata.controller import OP_SET
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, forward_authorized
from moldau.server.handlers.incremental_alter_configs import (
    Change,
    alter_refusals,
    alter_resources,
    reload_stores_after_forward,
    store_refusals,
)


async def handle(ctx: RequestContext, request: Any) -> Any:
    refusals = alter_refusals(ctx, request.resources)
    refusals |= store_refusals(ctx, request.resources, _changes, replace_all=True, refusals=refusals)
    forwarded = await forward_authorized(ctx, request, "resources", "responses", refusals)
    if forwarded is not None:
        reload_stores_after_forward(ctx, request, _changes)
        return forwarded
    responses = await alter_resources(ctx, request.resources, _changes, request.validate_only, replace_all=True,
                                      refusals=refusals)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, responses=responses)


def _changes(resource: Any) -> list[Change]:
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise KafkaError(ErrorCode.invalid_request, f"null value not supported for {', '.join(nulls)}")
    return [(c.name, OP_SET, c.value) for c in resource.configs]


API = Api(key=33, name="AlterConfigs", min_version=0, max_version=2, handle=handle)
