"""Which replica a consumer should read a partition from (KIP-392, fetch from the closest replica), sans-I/O.

The leader decides, for consumers that say their rack (Fetch v11+ `rack_id`, the client's `client.rack`), with
the broker's `replica.selector.class`: Kafka's `RackAwareReplicaSelector` or `LeaderSelector` (the same as none).
The rack-aware rule is Kafka's:

- a consumer without a rack, or in a rack no candidate replica is in, reads from the leader;
- if the leader is in the consumer's rack, from the leader;
- else from the replica of its rack with the highest log end offset, the one caught up most recently on a tie.

Candidates are the leader and the followers in the ISR whose log holds the fetch offset, on live brokers: a
follower outside the ISR may lag behind for good, and the consumer would keep falling behind with it (Kafka
leaves those out for the same reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the config definitions import the selector names; nothing else is needed at run time
    from moldau.replication.leader_state import LeaderState

LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS = (LEADER_SELECTOR, RACK_AWARE_SELECTOR)


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """What the selector knows of one replica."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    caught_up_ago_ms: int


def select_rack_aware(client_rack: str, leader: ReplicaView, followers: Iterable[ReplicaView]) -> ReplicaView:
    """The replica a consumer in `client_rack` should read from: the leader unless it is elsewhere and a follower
    is in the consumer's rack."""
    if not client_rack or leader.rack == client_rack:
        return leader
    same_rack = [f for f in followers if f.rack == client_rack]
    if not same_rack:
        return leader
    return max(same_rack, key=lambda f: (f.log_end_offset, -f.caught_up_ago_ms))


def read_candidates(state: LeaderState, fetch_offset: int, log_start_offset: int, now_ms: int,
                    racks: Mapping[int, str | None]) -> list[ReplicaView]:
    """The followers a consumer at `fetch_offset` could be sent to: in the ISR, holding the offset, and on a live
    broker (`racks` has the rack of every live broker)."""
    if fetch_offset < log_start_offset:
        return []  # out of range everywhere: the leader answers it
    out = []
    for broker_id, progress in state.followers.items():
        if broker_id in state.isr and broker_id in racks and progress.log_end_offset >= fetch_offset:
            out.append(ReplicaView(broker_id, racks[broker_id], progress.log_end_offset,
                                   max(0, now_ms - progress.last_caught_up_ms)))
    return out


def preferred_read_replica(selector: str | None, client_rack: str, leader: ReplicaView,
                           followers: Iterable[ReplicaView]) -> int | None:
    """The follower the consumer should read from, or None for the leader (which the answer never names)."""
    if selector != RACK_AWARE_SELECTOR or not client_rack:
        return None
    chosen = select_rack_aware(client_rack, leader, followers)
    return None if chosen.broker_id == leader.broker_id else chosen.broker_id
