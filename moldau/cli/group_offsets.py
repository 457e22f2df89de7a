"""Consumer-group offsets through confluent-kafka's AdminClient, awaited without blocking an event loop: a group's
committed offsets, partitions' offsets by spec (earliest, latest, by time), and where a reset moves a group's
offsets (always within each partition's earliest and latest offset).

`moldau groups` runs these with `asyncio.run`; the console awaits them in the broker's event loop, where blocking
on an AdminClient future would stall the very broker that answers it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

__all__ = ["RESET_MODES", "TP", "OffsetLookupFailed", "ResetRefused", "ResetTarget", "committed_offsets",
           "end_offsets", "list_offsets", "new_offsets", "wait"]

T = TypeVar("T")
TP = tuple[str, int]
RESET_MODES = ("earliest", "latest", "offset", "timestamp", "shift")


class OffsetLookupFailed(Exception):
    """The offset of one partition could not be read; `cause` is the client's error."""

    def __init__(self, partition: TP, cause: BaseException) -> None:
        super().__init__(f"cannot look up offsets of {partition[0]}:{partition[1]}: {cause}")
        self.partition = partition
        self.cause = cause


class ResetRefused(Exception):
    """A reset that cannot be planned (a shift without a committed offset, an unknown mode)."""


@dataclass(frozen=True)
class ResetTarget:
    """Where a reset moves offsets: the earliest or latest offset, a given offset, the first offset at or after a
    time (the end when there is none, as Kafka's tool does), or the committed offset moved by `shift`."""

    mode: str
    offset: int | None = None
    timestamp_ms: int | None = None
    shift: int | None = None


async def wait(future: Future[T], timeout_s: float) -> T:
    """The result of one AdminClient future, bounded so an unresponsive broker cannot hang the caller."""
    return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)


async def committed_offsets(admin: AdminClient, group: str, timeout_s: float) -> dict[TP, int | None]:
    """(topic, partition) -> committed offset of every partition the group has a commit for; raises what the
    client raises."""
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=timeout_s)
    result = await wait(futures[group], timeout_s + 5)
    # librdkafka reports "no commit" as a negative logical offset.
    return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in result.topic_partitions or []}


async def list_offsets(admin: AdminClient, specs: Mapping[TP, Any], timeout_s: float, *,
                       skip_failed: bool = False) -> dict[TP, int]:
    """(topic, partition) -> offset for each OffsetSpec. A partition whose offset cannot be read raises
    OffsetLookupFailed, or with `skip_failed` is left out (a page shows it as unknown)."""
    if not specs:
        return {}
    requests = {TopicPartition(topic, partition): spec for (topic, partition), spec in specs.items()}
    futures = admin.list_offsets(requests, request_timeout=timeout_s)
    found: dict[TP, int] = {}
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = int((await wait(future, timeout_s + 5)).offset)
        except Exception as exc:
            if not skip_failed:
                raise OffsetLookupFailed((tp.topic, tp.partition), exc) from exc
    return found


async def end_offsets(admin: AdminClient, partitions: Iterable[TP], timeout_s: float, *,
                      skip_failed: bool = False) -> dict[TP, int]:
    """(topic, partition) -> log end offset (high watermark)."""
    return await list_offsets(admin, {tp: OffsetSpec.latest() for tp in partitions},  # type: ignore[no-untyped-call]
                              timeout_s, skip_failed=skip_failed)


async def new_offsets(admin: AdminClient, group: str, partitions: list[TP], target: ResetTarget,
                      current: Mapping[TP, int | None], timeout_s: float) -> dict[TP, int]:
    """The offset a reset gives each partition, clamped to [earliest, latest]. Raises OffsetLookupFailed or
    ResetRefused."""
    earliest = await list_offsets(admin, {tp: OffsetSpec.earliest() for tp in partitions},  # type: ignore[no-untyped-call]
                                  timeout_s)
    latest = await end_offsets(admin, partitions, timeout_s)
    wanted = await _wanted(admin, group, partitions, target, current, latest, timeout_s)
    return {tp: max(earliest[tp], min(latest[tp], wanted[tp])) for tp in partitions}


async def _wanted(admin: AdminClient, group: str, partitions: list[TP], target: ResetTarget,
                  current: Mapping[TP, int | None], latest: dict[TP, int], timeout_s: float) -> dict[TP, int]:
    """The offset each mode asks for, before clamping."""
    if target.mode == "earliest":
        return {tp: 0 for tp in partitions}  # below every partition's earliest: clamping lands exactly on it
    if target.mode == "latest":
        return dict(latest)
    if target.mode == "offset" and target.offset is not None:
        return {tp: target.offset for tp in partitions}
    if target.mode == "timestamp" and target.timestamp_ms is not None:
        spec = OffsetSpec.for_timestamp(target.timestamp_ms)
        found = await list_offsets(admin, {tp: spec for tp in partitions}, timeout_s)
        # No record at or after the time: the consumer should start at the end, as Kafka's tool does.
        return {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in partitions}
    if target.mode == "shift" and target.shift is not None:
        missing = [f"{t}:{p}" for t, p in partitions if current.get((t, p)) is None]
        if missing:
            raise ResetRefused(f"cannot shift: group '{group}' has no committed offset for {', '.join(missing)}")
        return {tp: int(current[tp] or 0) + target.shift for tp in partitions}
    raise ResetRefused(f"unknown reset target {target.mode!r}; use one of {', '.join(RESET_MODES)}")
