"""What the console's group pages show and do, apart from HTTP: every group of every type with its total lag, one
group's members and per-partition lag, resetting a group's offsets and deleting a group.

Consumer groups (classic and KIP-848 `consumer` protocol) go through confluent-kafka's AdminClient with the same
offset functions as `moldau groups` (`moldau.cli.group_offsets`); the listing of all group types and share groups
(KIP-932) go through the CLI's share-group requests (`moldau.cli.share_groups`) on the user's pooled session of
Moldau's own client (`ConsoleClients.native`). Lag is what Kafka's tools and
kafka_exporter call lag: the partition's end offset (high watermark) minus the group's committed offset, or, for a
share group, the records from its start offset not yet acknowledged (DescribeShareGroupOffsets).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from moldau.cli import group_offsets
from moldau.cli.group_offsets import RESET_MODES, TP, OffsetLookupFailed, ResetRefused, ResetTarget
from moldau.cli.share_groups import (
    ListedGroup,
    ShareGroupView,
    alter_share_offsets_in,
    describe_share_group_in,
    list_groups_in,
)
from moldau.cli.table import format_assignment
from moldau.console.clients import REQUEST_TIMEOUT_MS, ConsoleClients
from moldau.console.errors import ConsoleError
from moldau.console.session import ConsoleSession, cli_failures

__all__ = ["FORM_RESET_MODES", "GroupDetail", "GroupRow", "MemberRow", "PartitionLag", "ResetTarget", "delete_group",
           "describe_group", "list_groups", "reset_offsets"]

TIMEOUT_S = REQUEST_TIMEOUT_MS / 1000
# What the reset form offers (the command line can also shift by a number).
FORM_RESET_MODES = tuple(mode for mode in RESET_MODES if mode != "shift")


@dataclass(frozen=True)
class GroupRow:
    """One line of `/groups`."""

    group_id: str
    group_type: str  # classic, consumer or share
    state: str
    protocol: str  # consumer, share, or (simple) for a classic group that only commits offsets
    assignor: str
    members: int
    lag: int | None  # total over the partitions with a known lag; None: no offsets at all


@dataclass(frozen=True)
class MemberRow:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TP, ...]

    @property
    def assignment_text(self) -> str:
        """`t:0,1 u:3`, or '-' for none (as `moldau groups describe` prints it)."""
        return format_assignment(list(self.assignment))


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    offset: int | None  # committed offset (consumer groups) or start offset (share groups); None: none yet
    end: int | None  # log end offset (high watermark); None: could not be read
    lag: int | None
    owner: str | None  # client id of the member it is assigned to


@dataclass(frozen=True)
class GroupDetail:
    group_id: str
    group_type: str
    state: str
    protocol: str
    assignor: str
    coordinator: str
    members: tuple[MemberRow, ...]
    partitions: tuple[PartitionLag, ...]

    @property
    def total_lag(self) -> int | None:
        known = [p.lag for p in self.partitions if p.lag is not None]
        return sum(known) if known else None

    @property
    def topics(self) -> list[str]:
        return sorted({p.topic for p in self.partitions} | {tp[0] for m in self.members for tp in m.assignment})

    @property
    def is_share(self) -> bool:
        return self.group_type == "share"


# ---- reading


async def list_groups(clients: ConsoleClients) -> list[GroupRow]:
    """Every group of every type, with members and total lag, sorted by id."""
    async with cli_failures():
        session = clients.native
        listed = await list_groups_in(session)
        shares = [await describe_share_group_in(session, g.group_id) for g in listed if g.group_type == "share"]
    consumers = [g for g in listed if g.group_type != "share"]
    descriptions = await _describe_consumer_groups(clients, [g.group_id for g in consumers])
    # A group the user may not read (or that vanished meanwhile) shows without lag rather than failing the page.
    fetched = await asyncio.gather(*(committed_offsets(clients, g.group_id) for g in consumers),
                                   return_exceptions=True)
    committed = [offsets if isinstance(offsets, dict) else {} for offsets in fetched]
    wanted = {tp for offsets in committed for tp in offsets} | {(p.topic, p.partition) for v in shares
                                                                 for p in v.partitions}
    ends = await end_offsets(clients, wanted)
    rows = [_consumer_row(g, descriptions.get(g.group_id), offsets, ends)
            for g, offsets in zip(consumers, committed, strict=True)]
    rows += [_share_row(view) for view in shares]
    return sorted(rows, key=lambda row: row.group_id)


def _consumer_row(listed: ListedGroup, description: Any, committed: dict[TP, int | None],
                  ends: dict[TP, int]) -> GroupRow:
    lags = [_lag(committed[tp], ends.get(tp)) for tp in committed]
    known = [lag for lag in lags if lag is not None]
    members = len(description.members) if description is not None else 0
    return GroupRow(listed.group_id, listed.group_type, listed.state, _protocol(description),
                    (description.partition_assignor if description is not None else "") or "-", members,
                    sum(known) if known else None)


def _share_row(view: ShareGroupView) -> GroupRow:
    known = [p.lag for p in view.partitions if p.lag >= 0]
    return GroupRow(view.group_id, "share", view.state, "share", "-", len(view.members),
                    sum(known) if known else None)


def _protocol(description: Any) -> str:
    if description is None:
        return "-"
    return "(simple)" if description.is_simple_consumer_group else "consumer"


def _lag(offset: int | None, end: int | None) -> int | None:
    return max(0, end - offset) if offset is not None and end is not None else None


async def describe_group(clients: ConsoleClients, group: str) -> GroupDetail:
    """One group's members and the lag of every partition it has an offset for or is assigned; ConsoleError 404
    for an unknown group."""
    async with cli_failures():
        listed = await _find(clients.native, group)
        if listed.group_type == "share":
            return await _describe_share(clients, await describe_share_group_in(clients.native, group))
    description = (await _describe_consumer_groups(clients, [group])).get(group)
    committed = await committed_offsets(clients, group)
    members = tuple(MemberRow(m.member_id, m.client_id, m.host, _assigned(m.assignment))
                    for m in sorted(description.members if description else [], key=lambda m: (m.client_id,
                                                                                               m.member_id)))
    owners = {tp: m.client_id for m in members for tp in m.assignment}
    wanted = sorted(set(committed) | set(owners))
    ends = await end_offsets(clients, wanted)
    partitions = tuple(PartitionLag(t, p, committed.get((t, p)), ends.get((t, p)),
                                    _lag(committed.get((t, p)), ends.get((t, p))), owners.get((t, p)))
                       for t, p in wanted)
    coordinator = description.coordinator if description is not None else None
    return GroupDetail(group, listed.group_type, listed.state, _protocol(description),
                       (description.partition_assignor if description is not None else "") or "-",
                       _node(coordinator), members, partitions)


async def _find(session: ConsoleSession, group: str) -> ListedGroup:
    for listed in await list_groups_in(session):
        if listed.group_id == group:
            return listed
    raise ConsoleError(404, f"group '{group}' does not exist (GROUP_ID_NOT_FOUND)")


async def _describe_share(clients: ConsoleClients, view: ShareGroupView) -> GroupDetail:
    members = tuple(MemberRow(m.member_id, m.client_id, m.client_host, tuple(sorted(
        (tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions)))
        for m in sorted(view.members, key=lambda m: (m.client_id, m.member_id)))
    owners: dict[TP, list[str]] = {}
    for member in members:
        for tp in member.assignment:
            owners.setdefault(tp, []).append(member.client_id)  # a share-partition can have many consumers
    ends = await end_offsets(clients, [(p.topic, p.partition) for p in view.partitions])
    partitions = tuple(PartitionLag(p.topic, p.partition, p.start_offset if p.start_offset >= 0 else None,
                                    ends.get((p.topic, p.partition)), p.lag if p.lag >= 0 else None,
                                    ", ".join(sorted(set(owners.get((p.topic, p.partition), [])))) or None)
                       for p in view.partitions)
    node, (host, port) = view.coordinator
    return GroupDetail(view.group_id, "share", view.state, "share", "-", f"{node} ({host}:{port})", members,
                       partitions)


def _assigned(assignment: Any) -> tuple[TP, ...]:
    partitions = assignment.topic_partitions if assignment is not None else []
    return tuple(sorted((tp.topic, tp.partition) for tp in partitions))


def _node(node: Any) -> str:
    if node is None or node.id < 0:
        return "-"
    return f"{node.id} ({node.host}:{node.port})"


async def _describe_consumer_groups(clients: ConsoleClients, groups: list[str]) -> dict[str, Any]:
    """group -> confluent-kafka's description; groups the broker cannot describe are left out."""
    if not groups:
        return {}
    futures = clients.admin.describe_consumer_groups(groups, request_timeout=TIMEOUT_S)
    described: dict[str, Any] = {}
    for group, future in futures.items():
        try:
            described[group] = await ConsoleClients.call(future)
        except KafkaException:
            continue  # shown without members; its offsets still say where it stands
    return described


async def committed_offsets(clients: ConsoleClients, group: str) -> dict[TP, int | None]:
    """(topic, partition) -> committed offset, for every partition the group has a commit for."""
    return await group_offsets.committed_offsets(clients.admin, group, TIMEOUT_S)


async def end_offsets(clients: ConsoleClients, partitions: Iterable[TP]) -> dict[TP, int]:
    """(topic, partition) -> log end offset; partitions whose offset cannot be read (deleted) are left out."""
    return await group_offsets.end_offsets(clients.admin, partitions, TIMEOUT_S, skip_failed=True)


# ---- changing


async def reset_offsets(clients: ConsoleClients, group: str, topic: str | None, target: ResetTarget
                        ) -> list[tuple[str, int, int | None, int]]:
    """Move the group's offsets on `topic`'s partitions (None: every partition it has an offset for) and return
    (topic, partition, old, new) for each. The broker refuses while the group has members; its error is raised as
    it is (KafkaException or, for share groups, ConsoleError)."""
    detail = await describe_group(clients, group)
    current = {(p.topic, p.partition): p.offset for p in detail.partitions}
    partitions = await _reset_partitions(clients, group, topic, current)
    new = await _new_offsets(clients, group, partitions, target, current)
    if detail.is_share:
        async with cli_failures():
            await alter_share_offsets_in(clients.native, group, new)
    else:
        await _commit(clients, group, new)
    return [(t, p, current.get((t, p)), new[(t, p)]) for t, p in partitions]


async def _reset_partitions(clients: ConsoleClients, group: str, topic: str | None,
                            current: dict[TP, int | None]) -> list[TP]:
    if topic is None:
        if not current:
            raise ConsoleError(400, f"group '{group}' has no offsets to reset; choose a topic")
        return sorted(current)
    # All topics, not just this one: asking for one by name may auto-create it on the broker.
    metadata = (await clients.metadata()).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise ConsoleError(404, f"topic '{topic}' does not exist")
    return [(topic, partition) for partition in sorted(metadata.partitions)]


async def _new_offsets(clients: ConsoleClients, group: str, partitions: list[TP], target: ResetTarget,
                       current: dict[TP, int | None]) -> dict[TP, int]:
    """The new offset of each partition, always within [earliest, latest]."""
    try:
        return await group_offsets.new_offsets(clients.admin, group, partitions, target, current, TIMEOUT_S)
    except OffsetLookupFailed as exc:
        raise ConsoleError(502, str(exc)) from None
    except ResetRefused as exc:
        raise ConsoleError(400, str(exc)) from None


async def _commit(clients: ConsoleClients, group: str, offsets: dict[TP, int]) -> None:
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in offsets.items()])]
    futures = clients.admin.alter_consumer_group_offsets(request, request_timeout=TIMEOUT_S)
    result = await ConsoleClients.call(futures[group])
    for tp in result.topic_partitions or []:
        if tp.error:
            raise KafkaException(tp.error)  # the broker's reason, as for a request-level failure


async def delete_group(clients: ConsoleClients, group: str) -> None:
    """DeleteGroups; the broker refuses a group with members (NON_EMPTY_GROUP), raised as KafkaException."""
    futures = clients.admin.delete_consumer_groups([group], request_timeout=TIMEOUT_S)
    await ConsoleClients.call(futures[group])
