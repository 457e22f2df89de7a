"""The dispatch filter that refuses the APIs a feature at level 0 turns off (KIP-584).

With `group.version` 0, ConsumerGroupHeartbeat and ConsumerGroupDescribe are refused, with `share.version` 0 the
share group APIs, with UNSUPPORTED_VERSION as Kafka answers (where the response has no top-level error code, the
connection closes). ApiVersions stops advertising them at the same time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moldau.metadata.features import turned_off_apis
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext


class FeatureGate:
    def __init__(self) -> None:
        self._features: Mapping[str, int] | None = None
        self._off: dict[int, str] = {}

    async def check(self, ctx: RequestContext, request: Any) -> None:
        if ctx.on_controller_listener:
            return
        features = ctx.broker.image.features
        if features is not self._features:  # replaced, never mutated, when a level changes: work it out once
            self._features, self._off = features, turned_off_apis(features)
        feature = self._off.get(ctx.header.api_key)
        if feature is not None:
            raise KafkaError(ErrorCode.unsupported_version, f"{feature} is 0: this API is turned off")
