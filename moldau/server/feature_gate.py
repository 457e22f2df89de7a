"""The dispatch filter that refuses the APIs a feature at level 0 turns off (KIP-584), or the broker's config.

With `group.version` 0, ConsumerGroupHeartbeat and ConsumerGroupDescribe are refused, with `share.version` 0 the
share group APIs, with UNSUPPORTED_VERSION as Kafka answers (where the response has no top-level error code, the
connection closes). ApiVersions stops advertising them at the same time. A broker whose
`group.coordinator.rebalance.protocols` leaves out `consumer` turns the same two consumer group APIs off for
itself (`config_turned_off_apis`), as Kafka does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moldau.config import BrokerConfig
from moldau.metadata.features import GATED_APIS, GROUP_VERSION, turned_off_apis
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext


def config_turned_off_apis(config: BrokerConfig) -> dict[int, str]:
    """API key -> why this broker's own configuration turns it off."""
    protocols = config.group_coordinator_rebalance_protocols
    if "consumer" in protocols:
        return {}
    reason = ("the consumer rebalance protocol is not enabled "
              f"(group.coordinator.rebalance.protocols={','.join(protocols)})")
    return dict.fromkeys(GATED_APIS[GROUP_VERSION], reason)


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
        reason = ctx.broker.config_turned_off_apis.get(ctx.header.api_key)
        if reason is not None:
            raise KafkaError(ErrorCode.unsupported_version, reason)
