"""Which acquired offsets a read_committed share group must not deliver, sans-I/O (KIP-932 with
`share.isolation.level=read_committed`).

A read_committed share-partition acquires only below the last stable offset, so every transaction it sees is
decided; of those records, the ones a consumer must never get are the data batches of aborted transactions and
the control batches (transaction markers, which hold no record for a consumer). Both are archived as soon as they
are acquired, as Kafka's share-partition does, so they never reach a member and never hold the SPSO back.

A data batch belongs to an aborted transaction when it is transactional, its producer is the aborted
transaction's, and it lies between the transaction's first offset and its abort marker (the partition's aborted
transaction index, `.txnindex`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from moldau.share.partition import AcquiredRange


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """What the decision needs from a stored batch's header."""

    base_offset: int
    last_offset: int
    producer_id: int
    transactional: bool
    control: bool


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of its abort marker


def undeliverable(batches: Iterable[StoredBatch], aborted: Iterable[AbortedTxn]) -> list[tuple[int, int]]:
    """The (first, last) offset ranges of the batches a read_committed consumer must not get."""
    by_producer: dict[int, list[AbortedTxn]] = {}
    for txn in aborted:
        by_producer.setdefault(txn.producer_id, []).append(txn)
    out = []
    for batch in batches:
        if batch.control or (batch.transactional and any(
                t.first_offset <= batch.base_offset <= t.last_offset for t in by_producer.get(batch.producer_id, ()))):
            out.append((batch.base_offset, batch.last_offset))
    return out


def without(acquired: Iterable[AcquiredRange], removed: Iterable[tuple[int, int]]) -> list[AcquiredRange]:
    """The acquired ranges less the removed offsets."""
    out = list(acquired)
    for first, last in removed:
        kept = []
        for r in out:
            if r.last_offset < first or r.first_offset > last:
                kept.append(r)
                continue
            if r.first_offset < first:
                kept.append(AcquiredRange(r.first_offset, first - 1, r.delivery_count))
            if r.last_offset > last:
                kept.append(AcquiredRange(last + 1, r.last_offset, r.delivery_count))
        out = kept
    return sorted(out, key=lambda r: r.first_offset)
