"""Offset syncs: how the mirror source records where upstream offsets landed on the target, and how the
checkpoint connector translates a consumer group's committed upstream offset to a target offset with them.

Offsets do not line up across clusters (transaction markers, compaction and earlier history make upstream
gaps; the target topic may have held records before), so the source writes `(upstream, downstream)` pairs as it
copies records. Writing one per record would double the traffic, so it writes one when translation would
otherwise fall more than `offset.lag.max` behind, when upstream offsets jump, and when the target went
backwards; in between it keeps the latest pair to write at the next periodic commit.

Translation never runs ahead: a group at upstream offset `u` is placed at the downstream offset of the nearest
sync at or before `u`, plus one when `u` is past it (the record at the sync was read, nothing more is known).
A consumer that fails over therefore re-reads at most what lies between that sync and `u`, and never skips a
record. The store keeps only a bounded number of syncs per partition, thinned with the distance to the newest,
so translation is exact near the live end and coarser further back (a group `d` offsets behind re-reads at
most about `d / 2` records more than at the live end).

Both halves are pure: no clock, no I/O; the connectors feed them and send what they return.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.mirror.records import OffsetSync

__all__ = ["OffsetSyncStore", "OffsetSyncWriter"]

# Thinning keeps about 2.5 syncs per doubling of the distance to the newest; a bound, whatever the offsets.
MAX_KEPT = 200


@dataclass(slots=True)
class _PartitionProgress:
    previous_upstream: int = -1
    previous_downstream: int = -1
    last_sync_downstream: int = -1

    def needs_sync(self, first: int, last: int, count: int, downstream: int, offset_lag_max: int) -> bool:
        """`count` records, upstream `first` to `last`, were copied in order, the last landing at `downstream`."""
        first_sync = self.last_sync_downstream == -1
        # Translation lands one past the last sync, hence the +1.
        too_stale = downstream - (self.last_sync_downstream + 1) >= offset_lag_max
        upstream_gap = first - self.previous_upstream != 1 or last - first + 1 != count
        # The run's first record sits at or before downstream - (count - 1); two records never share an offset
        # unless the target partition was truncated or recreated.
        target_went_back = downstream - (count - 1) <= self.previous_downstream
        self.previous_upstream, self.previous_downstream = last, downstream
        if first_sync or too_stale or upstream_gap or target_went_back:
            self.last_sync_downstream = downstream
            return True
        return False


class OffsetSyncWriter:
    """The source side: told of every record copied, it says which offset syncs to write now; `delayed()`
    hands over, at each periodic commit, the latest pair of the partitions that needed none in between."""

    def __init__(self, offset_lag_max: int) -> None:
        if offset_lag_max < 0:
            raise ValueError("offset.lag.max must not be negative")
        self._offset_lag_max = offset_lag_max
        self._progress: dict[tuple[str, int], _PartitionProgress] = {}
        # (topic, partition) -> (upstream, downstream) of the latest record: kept as a tuple because this runs
        # for every record (or run of records) copied; the OffsetSync is made only when it is sent.
        self._delayed: dict[tuple[str, int], tuple[int, int]] = {}

    def copied(self, topic: str, partition: int, upstream: int, downstream: int) -> OffsetSync | None:
        """Upstream record `upstream` of the source's `topic`-`partition` was written at `downstream` on the
        target: the sync to write now, if one is due."""
        key = (topic, partition)
        progress = self._progress.get(key)
        if progress is None:
            progress = self._progress[key] = _PartitionProgress()
        if progress.needs_sync(upstream, upstream, 1, downstream, self._offset_lag_max):
            self._delayed.pop(key, None)
            return OffsetSync(topic, partition, upstream, downstream)
        self._delayed[key] = (upstream, downstream)
        return None

    def copied_run(self, topic: str, partition: int, first: int, first_downstream: int, last: int,
                   last_downstream: int, count: int) -> list[OffsetSync]:
        """`count` records of the source's `topic`-`partition`, upstream offsets `first` to `last`, were written
        to the target in order, the first at `first_downstream`, the last at `last_downstream` (where the others
        landed is not known): the syncs to write now. The first record is judged as by `copied`; for the rest a
        sync falls due only at the last, so syncs may lie up to a run's length further apart than
        `offset.lag.max`."""
        syncs = []
        first_sync = self.copied(topic, partition, first, first_downstream)
        if first_sync is not None:
            syncs.append(first_sync)
        if count > 1:
            progress = self._progress[(topic, partition)]
            if progress.needs_sync(first + 1, last, count - 1, last_downstream, self._offset_lag_max):
                self._delayed.pop((topic, partition), None)
                syncs.append(OffsetSync(topic, partition, last, last_downstream))
            else:
                self._delayed[(topic, partition)] = (last, last_downstream)
        return syncs

    def delayed(self) -> list[OffsetSync]:
        syncs = [OffsetSync(topic, partition, up, down) for (topic, partition), (up, down) in self._delayed.items()]
        self._delayed.clear()
        return syncs

    def forget(self, topic: str, partition: int) -> None:
        """The partition is no longer copied by this task (reassigned): start afresh if it comes back."""
        self._progress.pop((topic, partition), None)
        self._delayed.pop((topic, partition), None)


class OffsetSyncStore:
    """The checkpoint side: fed the offset syncs topic in order, it translates upstream offsets.

    Until `caught_up()` is called (the topic has been read to its end once), it translates nothing: the
    history read so far may be missing syncs that compaction removed, and an old sync would translate a
    group to an offset far behind where it is.

    Per partition it keeps a short history, newest first, thinned so that the gap between two neighbouring
    syncs kept is at most half the distance from the newer one to the newest sync (or the gap the syncs came
    with). A group at `u`, a distance `d` behind the newest sync, is so placed at most about `d / 2` (or one
    gap of the syncs written) before `u`: exact near the live end, coarser further back, never worse than that
    however the offsets fall, and about 2.5 * log2(newest / gap) syncs kept.
    """

    def __init__(self) -> None:
        self._syncs: dict[tuple[str, int], list[OffsetSync]] = {}
        self._caught_up = False

    def caught_up(self) -> None:
        self._caught_up = True

    def add(self, sync: OffsetSync) -> None:
        key = (sync.topic, sync.partition)
        kept = self._syncs.get(key)
        if kept is None or not self._caught_up or sync.upstream_offset < kept[0].upstream_offset:
            # Starting out, or the upstream partition was recreated or truncated: only the newest sync holds.
            self._syncs[key] = [sync]
            return
        if sync.upstream_offset == kept[0].upstream_offset:
            kept[0] = sync  # the record copied again (after a crash): its latest copy
        else:
            kept.insert(0, sync)
        self._syncs[key] = _thinned(kept)

    def translate(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """The target offset for a group committed at `upstream_offset` of the source's `topic`-`partition`;
        None when it cannot be known safely (not caught up, no sync, or every sync kept is newer)."""
        if not self._caught_up:
            return None
        kept = self._syncs.get((topic, partition))
        if kept is None:
            return None
        nearest = next((s for s in kept if s.upstream_offset <= upstream_offset), None)
        if nearest is None:
            return None
        step = 0 if nearest.upstream_offset == upstream_offset else 1
        return nearest.downstream_offset + step


def _thinned(kept: list[OffsetSync]) -> list[OffsetSync]:
    """`kept` (newest first) without the syncs whose neighbours are close enough for the distance to the newest:
    a sync goes when the gap it leaves, between the syncs before and after it, is at most half the distance from
    the newer of those to the newest sync."""
    newest = kept[0].upstream_offset
    result = [kept[0]]
    for index in range(1, len(kept)):
        sync = kept[index]
        if index + 1 < len(kept):
            newer, older = result[-1].upstream_offset, kept[index + 1].upstream_offset
            if 2 * (newer - older) <= newest - newer:
                continue
        result.append(sync)
    return result[:MAX_KEPT]
