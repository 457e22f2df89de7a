"""A share-partition's durable state as snapshot plus updates, sans-I/O: how a ShareUpdate (or a write naming only
some batches) applies over the state before it, and how many records of the window are done.

A write's batches replace whatever the state held for their offsets; the others keep theirs. Offsets below the
start offset are gone from the window: batches are cut there. Adjacent batches with the same state and delivery
count are joined, so a state stays as small as the window's shape, whatever the number of updates behind it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from moldau.coordinator.share.records import ShareSnapshot, ShareUpdate, StateBatch

_AVAILABLE, _ACQUIRED = 0, 1
_DONE = (2, 4)  # Acknowledged, Archived


def merge_batches(current: Iterable[StateBatch], changed: Iterable[StateBatch], start_offset: int
                  ) -> tuple[StateBatch, ...]:
    """`current` with `changed` laid over it, cut at `start_offset`."""
    out = list(current)
    for new in changed:
        out = [piece for old in out for piece in _outside(old, new.first_offset, new.last_offset)]
        out.append(new)
    out.sort(key=lambda b: b.first_offset)
    return _joined(_cut(out, start_offset))


def apply_update(state: ShareSnapshot, update: ShareUpdate) -> ShareSnapshot:
    """The state after the update (replayed, or written): a new SPSO if it names one, its batches over the old."""
    start = update.start_offset if update.start_offset >= 0 else state.start_offset
    start = max(start, state.start_offset)  # the SPSO never moves back
    return ShareSnapshot(state.snapshot_epoch, state.state_epoch, update.leader_epoch, start,
                         merge_batches(state.batches, update.batches, start))


def delivery_complete_count(state: ShareSnapshot) -> int:
    """Offsets at or past the SPSO whose delivery is over (Acknowledged or Archived), ReadShareGroupStateSummary's
    DeliveryCompleteCount."""
    return sum(b.last_offset - max(b.first_offset, state.start_offset) + 1 for b in state.batches
               if b.delivery_state in _DONE and b.last_offset >= state.start_offset)


def delivering_count(state: ShareSnapshot) -> int:
    """Offsets at or past the SPSO whose delivery is under way as far as the durable state knows: Available with
    at least one delivery (an acquisition is written as Available with its deliveries, and so is a release)."""
    return sum(b.last_offset - max(b.first_offset, state.start_offset) + 1 for b in state.batches
               if b.last_offset >= state.start_offset and b.delivery_count > 0
               and b.delivery_state in (_AVAILABLE, _ACQUIRED))


def _outside(batch: StateBatch, first: int, last: int) -> list[StateBatch]:
    """The parts of `batch` outside first..last."""
    if batch.last_offset < first or batch.first_offset > last:
        return [batch]
    pieces = []
    if batch.first_offset < first:
        pieces.append(replace(batch, last_offset=first - 1))
    if batch.last_offset > last:
        pieces.append(replace(batch, first_offset=last + 1))
    return pieces


def _cut(batches: list[StateBatch], start_offset: int) -> list[StateBatch]:
    return [b if b.first_offset >= start_offset else replace(b, first_offset=start_offset)
            for b in batches if b.last_offset >= start_offset]


def _joined(batches: list[StateBatch]) -> tuple[StateBatch, ...]:
    out: list[StateBatch] = []
    for batch in batches:
        last = out[-1] if out else None
        if (last is not None and last.last_offset + 1 == batch.first_offset
                and (last.delivery_state, last.delivery_count) == (batch.delivery_state, batch.delivery_count)):
            out[-1] = replace(last, last_offset=batch.last_offset)
        else:
            out.append(batch)
    return tuple(out)
