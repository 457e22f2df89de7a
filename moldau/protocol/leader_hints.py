"""KIP-951's leader hints, as Produce (v10+) and Fetch (v16+) answers carry them.

A partition refused with NOT_LEADER_OR_FOLLOWER (and, in Fetch, FENCED_LEADER_EPOCH) names its current leader and
leader epoch in a tagged field (`CurrentLeader`), and the response lists those leaders' addresses in a tagged
`NodeEndpoints` array, so that a client moves to the new leader at once instead of first refreshing its metadata
(librdkafka 2.4 and the Java client 3.7 act on them). Both fields are tagged: clients that do not know them skip them.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from moldau.protocol.wire import I32, NO_TAGS, nullable_string, string, tagged_field, uvarint

_LEADER_AND_EPOCH = struct.Struct(">ii")


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


def current_leader_field(tag: int, leader: tuple[int, int]) -> bytes:
    """A `LeaderIdAndEpoch` struct as the tagged field `tag`: tag, size, leader id, leader epoch, no tags."""
    return tagged_field(tag, _LEADER_AND_EPOCH.pack(*leader) + NO_TAGS)


def node_endpoints_field(tag: int, endpoints: Sequence[NodeEndpoint]) -> bytes:
    """The `NodeEndpoints` array as the tagged field `tag` (flexible versions only: compact encoding)."""
    body = bytearray(uvarint(len(endpoints) + 1))
    for e in endpoints:
        body += I32.pack(e.node_id) + string(e.host, True) + I32.pack(e.port) + nullable_string(e.rack, True)
        body += NO_TAGS
    return tagged_field(tag, bytes(body))
