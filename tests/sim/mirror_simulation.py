"""A seeded simulation of one mirrored partition, for MirrorMaker 2's offset translation.

A mirror copies an upstream partition (with gaps: transaction markers, compaction) to a target partition that
may already hold records. It writes offset syncs as `OffsetSyncWriter` says, immediately or at periodic
commits; it crashes now and then, losing its unsent syncs and copying again from its last committed position
(so the target gets duplicates, as at-least-once allows). A checkpoint side reads the syncs topic with some
lag into an `OffsetSyncStore`, catching up at some point. Consumer groups at random upstream offsets are
translated, and the invariant checked is the one failover depends on: a consumer that starts at the
translated offset sees every upstream record at or after its committed offset (nothing skipped).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from moldau.mirror.offset_syncs import OffsetSyncStore, OffsetSyncWriter
from moldau.mirror.records import OffsetSync

TOPIC, PARTITION = "orders", 0


class InvariantViolation(AssertionError):
    pass


@dataclass
class MirrorSimulation:
    seed: int
    records: int = 400
    offset_lag_max: int = 10
    runs: bool = False  # copy runs of records at a time, as the worker's pass-through path reports them
    rng: random.Random = field(init=False)
    upstream: list[int] = field(default_factory=list)       # offsets of the records that exist upstream
    last_copy: dict[int, int] = field(default_factory=dict)  # upstream offset -> its latest downstream offset
    syncs_topic: list[bytes] = field(default_factory=list)   # the offset syncs topic, as serialized values
    target_end: int = 0
    copied_upto: int = 0  # records upstream[:copied_upto] are copied in the mirror's current run
    translations: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        offset = self.rng.randrange(0, 30)
        for _ in range(self.records):
            self.upstream.append(offset)
            offset += 1 if self.rng.random() > 0.1 else self.rng.randrange(2, 20)
        self.target_end = self.rng.randrange(0, 50)  # the target partition held records before mirroring began

    def run(self) -> None:
        writer = OffsetSyncWriter(self.offset_lag_max)
        store = OffsetSyncStore()
        read = 0  # how far the checkpoint side has read the syncs topic
        next_index = committed_index = 0
        while next_index < len(self.upstream):
            self.copied_upto = next_index
            roll = self.rng.random()
            if roll < 0.02:  # the mirror crashes: unsent syncs lost, copying resumes at the last commit
                writer = OffsetSyncWriter(self.offset_lag_max)
                next_index = committed_index
                continue
            if roll < 0.08:  # periodic commit: delayed syncs go out, the source position is committed
                self._write(writer.delayed())
                committed_index = next_index
            if self.runs:
                count = min(self.rng.randrange(1, 25), len(self.upstream) - next_index)
                self._copy_run(writer, self.upstream[next_index:next_index + count])
                next_index += count
                self.copied_upto = next_index  # the whole run counts as copied for the checks that follow
            else:
                self._copy(writer, self.upstream[next_index])
                next_index += 1
            read = self._read_some(store, read)
            if self.rng.random() < 0.2:
                self._check(store)
        self.copied_upto = next_index
        self._write(writer.delayed())
        self._read_some(store, read, everything=True)
        store.caught_up()
        for _ in range(50):
            self._check(store)

    def _copy(self, writer: OffsetSyncWriter, upstream: int) -> None:
        downstream = self.target_end
        self.target_end += 1
        self.last_copy[upstream] = downstream
        sync = writer.copied(TOPIC, PARTITION, upstream, downstream)
        if sync is not None:
            self._write([sync])

    def _copy_run(self, writer: OffsetSyncWriter, upstream: list[int]) -> None:
        for offset in upstream:
            self.last_copy[offset] = self.target_end
            self.target_end += 1
        self._write(writer.copied_run(TOPIC, PARTITION, upstream[0], self.last_copy[upstream[0]], upstream[-1],
                                      self.target_end - 1, len(upstream)))

    def _write(self, syncs: list[OffsetSync]) -> None:
        # Through the record format, as the connectors send them.
        self.syncs_topic += [s.key() + b"|" + s.value() for s in syncs]

    def _read_some(self, store: OffsetSyncStore, read: int, everything: bool = False) -> int:
        until = len(self.syncs_topic) if everything else min(len(self.syncs_topic), read + self.rng.randrange(0, 3))
        for raw in self.syncs_topic[read:until]:
            key, value = raw[:len(raw) - 17], raw[len(raw) - 16:]
            store.add(OffsetSync.from_record(key, value))
        if until == len(self.syncs_topic) and self.rng.random() < 0.3:
            store.caught_up()
        return until

    def _check(self, store: OffsetSyncStore) -> None:
        if not self.upstream:
            return
        committed = self.rng.randrange(self.upstream[0], self.upstream[-1] + 3)
        translated = store.translate(TOPIC, PARTITION, committed)
        if translated is None:
            return
        self.translations += 1
        # Every record at or after the committed offset that this run of the mirror has copied must lie at or
        # after the translated offset; the records it has yet to copy (again, after a crash) will land at the end.
        later = [self.last_copy[up] for up in self.upstream[:self.copied_upto] if up >= committed]
        safe = min(later) if later else self.target_end
        if translated > safe:
            raise InvariantViolation(
                f"seed {self.seed}: a group committed at {committed} translates to {translated}, past {safe}, "
                "so a consumer failing over would skip records")
