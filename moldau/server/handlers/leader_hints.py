"""KIP-951's leader hints, filled in for the Produce and Fetch handlers.

A partition refused because this broker does not lead it (NOT_LEADER_OR_FOLLOWER; in Fetch also
FENCED_LEADER_EPOCH) names the leader and leader epoch the metadata image holds, and the answer gives those leaders'
addresses on the listener the client came in on, as Metadata would; the client goes there without a metadata
refresh first. A partition without a leader, or a leader whose address is unknown or fenced, gets no hint of that
part: the client refreshes its metadata as before. ShareFetch and ShareAcknowledge (KIP-932) carry the same two
fields; `moldau.server.handlers.share_common` fills them with the functions below.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from moldau.protocol.errors import ErrorCode
from moldau.protocol.leader_hints import NodeEndpoint

if TYPE_CHECKING:
    from moldau.server.context import RequestContext

PRODUCE_ERRORS = frozenset({ErrorCode.not_leader_or_follower.value})
FETCH_ERRORS = frozenset({ErrorCode.not_leader_or_follower.value, ErrorCode.fenced_leader_epoch.value})


class Hinted(Protocol):
    """A partition's answer (Produce's or Fetch's) with room for the hint."""

    partition: int
    error_code: int
    current_leader: tuple[int, int] | None


def add_leader_hints(ctx: RequestContext, refused: Iterable[tuple[str | uuid.UUID | None, Hinted]]
                     ) -> list[NodeEndpoint]:
    """Set `current_leader` on each refused partition (keyed by topic name or id) whose leader the image knows;
    return the addresses of those leaders."""
    leaders: set[int] = set()
    for key, answer in refused:
        leader = current_leader(ctx, key, answer.partition)
        if leader is not None:
            answer.current_leader = leader
            leaders.add(leader[0])
    return leader_endpoints(ctx, leaders)


def current_leader(ctx: RequestContext, key: str | uuid.UUID | None, partition: int) -> tuple[int, int] | None:
    """(leader id, leader epoch) of a partition (its topic by name or id) as the image has it; None if leaderless."""
    image = ctx.broker.image
    topic = image.topics_by_id.get(key) if isinstance(key, uuid.UUID) else (
        image.topics_by_name.get(key) if key is not None else None)
    found = topic.partitions.get(partition) if topic is not None else None
    if found is None or found.leader < 0:
        return None
    return found.leader, found.leader_epoch


def leader_endpoints(ctx: RequestContext, leaders: Iterable[int]) -> list[NodeEndpoint]:
    """The addresses of `leaders` on the client's listener, as Metadata gives them (fenced brokers left out)."""
    image = ctx.broker.image
    endpoints = []
    for leader in sorted(leaders):
        registration = image.brokers.get(leader)
        if registration is None or registration.fenced:
            continue
        endpoint = ctx.broker.endpoint_for(registration, ctx.listener)
        if endpoint is not None:
            endpoints.append(NodeEndpoint(leader, endpoint.host, endpoint.port, registration.rack))
    return endpoints
