"""What the Spark driver asks the broker: which partitions a subscription covers and their offsets.

Only the driver uses this (planning a batch, choosing a micro-batch's end offsets); tasks read records in
`moldau.spark.fetch`. A `Cluster` holds one AdminClient: create it where it is used, never in an object
that Spark pickles.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from confluent_kafka import IsolationLevel, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from moldau.spark.offsets import EARLIEST, LATEST, Offsets, TopicPartition, describe
from moldau.spark.options import OffsetBound, OptionError, Subscription

# The client library leaves these constructors untyped.
SPEC: Any = OffsetSpec


class BrokerError(RuntimeError):
    """The broker could not be reached or refused a lookup."""


class Cluster:
    """Metadata and offset lookups through one AdminClient (`close()` it when done)."""

    def __init__(self, bootstrap: str, conf: Mapping[str, str], isolation_level: str = "read_uncommitted",
                 timeout_s: float = 30.0) -> None:
        try:
            self._admin = AdminClient({**conf, "bootstrap.servers": bootstrap})
        except KafkaException as exc:
            raise OptionError(f"kafka.* options rejected by the client: {exc.args[0]}") from None
        self._timeout_s = timeout_s
        self._isolation = (IsolationLevel.READ_COMMITTED if isolation_level == "read_committed"
                           else IsolationLevel.READ_UNCOMMITTED)

    def close(self) -> None:
        """Nothing to release explicitly today (the client closes when collected); kept for callers' clarity."""

    def topics(self) -> dict[str, int]:
        """Every topic's partition count. Lists all topics, because asking for one by name may create it."""
        try:
            metadata = self._admin.list_topics(timeout=self._timeout_s)
        except KafkaException as exc:
            raise BrokerError(f"cannot list topics: {exc.args[0]}") from None
        return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}

    def partitions(self, subscription: Subscription, allow_empty: bool = False,
                   strict: bool = True) -> list[TopicPartition]:
        """The topic-partitions the subscription covers now.

        With `strict`, a named topic or assigned partition that does not exist is an error, and so is a
        pattern matching nothing unless `allow_empty` (a stream may wait for its topics). Without it (a
        running stream), whatever is missing is left out, for the caller to report as data loss.
        """
        counts = self.topics()
        if subscription.kind == "assign":
            missing = [tp for tp in subscription.assigned if tp.partition >= counts.get(tp.topic, 0)]
            if missing and strict:
                raise OptionError(f"assign: unknown topic-partitions {describe(missing)}")
            return sorted(set(subscription.assigned) - set(missing))
        if subscription.kind == "subscribe":
            unknown = [t for t in subscription.topics if t not in counts]
            if unknown and strict:
                raise OptionError(f"subscribe: unknown topic(s) {', '.join(unknown)}")
            topics = [t for t in subscription.topics if t in counts]
        else:
            # Like Kafka's consumers, a pattern leaves out internal topics (named with a leading "__").
            topics = [t for t in counts if not t.startswith("__") and subscription.matches(t)]
            if not topics and strict and not allow_empty:
                raise OptionError(f"subscribePattern: no topic matches {subscription.pattern!r}")
        return sorted(TopicPartition(t, p) for t in topics for p in range(counts[t]))

    def earliest(self, tps: Iterable[TopicPartition]) -> Offsets:
        """The log start offset of each partition."""
        return self._list({tp: SPEC.earliest() for tp in tps})

    def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        """The end offset of each partition (the last stable offset under read_committed)."""
        return self._list({tp: SPEC.latest() for tp in tps})

    def for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """The first offset whose timestamp is at least the given one, or None if no such record exists."""
        found = self._list({tp: SPEC.for_timestamp(ts) for tp, ts in timestamps.items()})
        return {tp: (off if off >= 0 else None) for tp, off in found.items()}

    def _list(self, specs: Mapping[TopicPartition, Any]) -> Offsets:
        if not specs:
            return {}
        request = {CkTopicPartition(tp.topic, tp.partition): spec for tp, spec in specs.items()}
        futures = self._admin.list_offsets(request, isolation_level=self._isolation,
                                           request_timeout=self._timeout_s)
        out: Offsets = {}
        for ck_tp, future in futures.items():
            try:
                out[TopicPartition(ck_tp.topic, ck_tp.partition)] = future.result().offset
            except KafkaException as exc:
                raise BrokerError(f"cannot list offsets of {ck_tp.topic}-{ck_tp.partition}: {exc.args[0]}") from None
        return out


def resolve(cluster: Cluster, bound: OffsetBound | None, tps: list[TopicPartition],
            default: Literal["earliest", "latest"], no_match: Literal["error", "latest"]) -> Offsets:
    """Concrete offsets for `tps` from an option's bound (None means `default`).

    Partitions the bound does not name get `default`; naming a partition outside `tps` is an error. A
    timestamp with no record at or after it resolves per `no_match`: an error, or the latest offset.
    """
    if bound is None or bound.kind in ("earliest", "latest"):
        kind = default if bound is None else bound.kind
        return cluster.earliest(tps) if kind == "earliest" else cluster.latest(tps)
    _check_named(bound, tps)
    fallback = EARLIEST if default == "earliest" else LATEST
    if bound.kind == "offsets":
        wanted = {tp: bound.offsets.get(tp, fallback) for tp in tps}
        return _replace_special(cluster, wanted)
    stamps: dict[TopicPartition, int | None] = {
        tp: bound.timestamp if bound.kind == "timestamp" else bound.offsets.get(tp) for tp in tps}
    found = cluster.for_times({tp: ts for tp, ts in stamps.items() if ts is not None})
    unmatched = [tp for tp, off in found.items() if off is None]
    if unmatched and no_match == "error":
        raise OptionError(f"no record at or after the given timestamp in {describe(unmatched)} "
                          "(set startingOffsetsByTimestampStrategy=latest to start at the end instead)")
    wanted = {tp: _pick(stamps[tp], found.get(tp), fallback) for tp in tps}
    return _replace_special(cluster, wanted)


def _pick(stamp: int | None, found: int | None, fallback: int) -> int:
    """No timestamp given: the fallback; a timestamp with no record at or after it: the latest offset."""
    if stamp is None:
        return fallback
    return LATEST if found is None else found


def _check_named(bound: OffsetBound, tps: list[TopicPartition]) -> None:
    outside = set(bound.offsets) - set(tps)
    if outside:
        raise OptionError(f"offsets given for topic-partitions outside the subscription: {describe(outside)}")


def _replace_special(cluster: Cluster, wanted: Mapping[TopicPartition, int]) -> Offsets:
    """-2/-1 replaced by the partition's earliest/latest offset."""
    earliest = cluster.earliest([tp for tp, off in wanted.items() if off == EARLIEST])
    latest = cluster.latest([tp for tp, off in wanted.items() if off == LATEST])
    return {tp: earliest.get(tp, latest.get(tp, off)) if off in (EARLIEST, LATEST) else off
            for tp, off in wanted.items()}
