"""DescribeClientQuotas (key 48): the client quotas whose entities match a filter (KIP-546).

Each filter component names an entity type and a match: EXACT (0) a name, DEFAULT (1) the type's default, ANY
(2) any entity that names the type. An entity matches when every component does; with `strict`, it must also
name no other entity type. An empty, non-strict filter matches every entity. Answered by any broker from its
metadata image (quotas are replicated to every node through the metadata log), as Kafka's brokers do.
INVALID_REQUEST for an unknown match type or a type named twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.quotas import Entity
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
Component = tuple[str, int, str | None]


async def handle(ctx: RequestContext, request: Any) -> Any:
    components = [(c.entity_type, int(c.match_type), c.match) for c in request.components]
    try:
        matched = matching(ctx.broker.image.client_quotas.items(), components, request.strict)
    except KafkaError as exc:
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=exc.code,
                    error_message=exc.message, entries=None)
    entity_cls, value_cls, entry_cls = ctx.nested("EntityData"), ctx.nested("ValueData"), ctx.nested("EntryData")
    entries = tuple(
        make(entry_cls,
             entity=tuple(entity_cls(entity_type=t, entity_name=n) for t, n in entity),
             values=tuple(make(value_cls, key=k, value=v) for k, v in sorted(values.items())))
        for entity, values in matched
    )
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                error_message=None, entries=entries)


def matching(quotas: Iterable[tuple[Entity, Any]], components: list[Component], strict: bool
             ) -> list[tuple[Entity, Any]]:
    """The (entity, values) pairs the filter matches, sorted by entity. Raises KafkaError(INVALID_REQUEST)."""
    types = [t for t, _, _ in components]
    if len(set(types)) != len(types):
        raise KafkaError(ErrorCode.invalid_request, "an entity type is named more than once in the filter")
    for _, match_type, _ in components:
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise KafkaError(ErrorCode.invalid_request, f"unknown match type {match_type}")
    out = []
    for entity, values in quotas:
        names = dict(entity)
        if strict and set(names) != set(types):
            continue
        if all(_matches(names, c) for c in components):
            out.append((entity, values))
    return sorted(out, key=lambda item: [(t, n or "") for t, n in item[0]])


def _matches(names: dict[str, str | None], component: Component) -> bool:
    entity_type, match_type, match = component
    if entity_type not in names:
        return False
    name = names[entity_type]
    if match_type == MATCH_EXACT:
        return name is not None and name == match
    if match_type == MATCH_DEFAULT:
        return name is None
    return True


API = Api(key=48, name="DescribeClientQuotas", min_version=0, max_version=1, handle=handle)
