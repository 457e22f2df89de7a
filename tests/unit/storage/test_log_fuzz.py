"""Seeded random sequences of log operations checked against a simple in-memory model."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import parse_header
from moldau.storage.log import PartitionLog
from moldau.storage.log_config import LogConfig
from tests.unit.storage.batches import START_MS, batches_of, make_batch
from tests.unit.storage.conftest import crash


@dataclass
class Model:
    """Every batch ever appended and not truncated: (base offset, [(value, timestamp)])."""

    batches: list[tuple[int, list[tuple[bytes, int]]]] = field(default_factory=list)
    log_start: int = 0
    end: int = 0
    # The idempotent producer's stored batches: (first offset, last offset, last sequence, bytes).
    produced: list[tuple[int, int, int, bytes]] = field(default_factory=list)

    def record(self, offset: int) -> tuple[bytes, int]:
        for base, records in self.batches:
            if base <= offset < base + len(records):
                return records[offset - base]
        raise KeyError(offset)

    def truncate(self, offset: int, first_segment_base: int) -> None:
        """Batches holding `offset` or later go whole; below the log start the log restarts there."""
        kept = [(b, r) for b, r in self.batches if b + len(r) - 1 < offset]
        self.produced = [p for p in self.produced if p[1] < offset]
        if offset < self.log_start or offset <= first_segment_base:
            self.log_start = self.end = offset
        elif len(kept) < len(self.batches):
            self.end = self.batches[len(kept)][0]
            self.log_start = min(self.log_start, self.end)
        self.batches = kept


class Fuzzer:
    def __init__(self, seed: int, directory: Path) -> None:
        self.rng = random.Random(seed)
        self.clock = ManualClock(START_MS)
        self.directory = str(directory / "fuzz-0")
        self.config = replace(
            LogConfig(),
            segment_bytes=self.rng.choice([600, 1500, 4000]),
            index_interval_bytes=self.rng.choice([0, 100, 700]),
            retention_ms=self.rng.choice([-1, 3000, 20_000]),
            retention_bytes=self.rng.choice([-1, 2000, 6000]),
            segment_ms=self.rng.choice([2000, 10**9]),
        )
        self.model = Model()
        self.log = PartitionLog.open(self.directory, self.config, self.clock)

    def run(self, steps: int) -> None:
        ops = [self.append] * 6 + [self.read] * 4 + [self.produce] * 2 + [
            self.tick, self.retention, self.delete_records, self.reopen_clean, self.reopen_crashed,
            self.torn_tail, self.timestamp_lookup, self.truncate,
        ]
        for _ in range(steps):
            self.rng.choice(ops)()
            self.check_offsets()
        self.log.close()

    def check_offsets(self) -> None:
        assert self.log.log_end_offset == self.model.end
        assert self.log.high_watermark == self.model.end
        assert self.log.log_start_offset == self.model.log_start

    # -- operations ----------------------------------------------------------------------------------

    def append(self) -> None:
        raws, expected = [], []
        for _ in range(self.rng.randint(1, 3)):
            n = self.rng.randint(1, 6)
            records = [(self.rng.randbytes(self.rng.randint(0, 60)),
                        self.clock.time_ms() + self.rng.randint(-500, 500)) for _ in range(n)]
            raws.append(make_batch([v for v, _ in records], timestamps=[t for _, t in records],
                                   compression=self.rng.randint(0, 4)))
            expected.append(records)
        if sum(len(r) for r in raws) > self.config.segment_bytes:
            with pytest.raises(KafkaError) as e:
                self.log.append(batches_of(*raws), 0)
            assert e.value.code == ErrorCode.record_list_too_large
            return
        result = self.log.append(batches_of(*raws), self.rng.randint(0, 3))
        offset = result.first_offset
        assert offset == self.model.end
        for records in expected:
            self.model.batches.append((offset, records))
            offset += len(records)
        self.model.end = offset
        assert result.last_offset == offset - 1

    def produce(self) -> None:
        """An idempotent producer (id 1, epoch 0): new batches, retries of the last one, and gaps."""
        produced = self.model.produced
        # The partition remembers the producer while its last batch is at or above the log start.
        known = bool(produced) and produced[-1][1] >= self.model.log_start
        if known and self.rng.random() < 0.3:
            first, last, _, raw = produced[-1]
            result = self.log.append(batches_of(raw), 0)
            assert (result.first_offset, result.last_offset, result.duplicate) == (first, last, True)
            return
        next_seq = produced[-1][2] + 1 if produced else 0
        n = self.rng.randint(1, 4)
        if known and self.rng.random() < 0.2:
            gap = make_batch([b"gap"] * n, timestamp_ms=self.clock.time_ms(), producer_id=1, producer_epoch=0,
                             base_sequence=next_seq + 3)
            with pytest.raises(KafkaError) as e:
                self.log.append(batches_of(gap), 0)
            assert e.value.code == ErrorCode.out_of_order_sequence_number
            return
        records = [(b"p%d" % (next_seq + i), self.clock.time_ms()) for i in range(n)]
        raw = make_batch([v for v, _ in records], timestamp_ms=self.clock.time_ms(), producer_id=1,
                         producer_epoch=0, base_sequence=next_seq)
        result = self.log.append(batches_of(raw), 0)
        assert not result.duplicate and result.first_offset == self.model.end
        self.model.batches.append((result.first_offset, records))
        self.model.end = result.last_offset + 1
        produced.append((result.first_offset, result.last_offset, next_seq + n - 1, raw))

    def read(self) -> None:
        offset = self.rng.randint(self.model.log_start, self.model.end)
        max_bytes = self.rng.choice([1, 100, 500, 5000])
        min_one = self.rng.random() < 0.7
        result = self.log.read(offset, max_bytes, min_one)
        data = result.read_bytes()
        if offset == self.model.end:
            assert data == b""
            return
        batches = _split(data)
        if not min_one or len(batches) > 1:  # only a lone first batch may exceed max_bytes
            assert len(data) <= max_bytes
        if not batches:
            assert not min_one
            return
        first_base, first_records = batches[0]
        assert first_base <= offset < first_base + len(first_records)
        expected_offset = first_base
        for base, records in batches:
            assert base == expected_offset
            for i, (value, ts) in enumerate(records):
                assert (value, ts) == self.model.record(base + i)
            expected_offset = base + len(records)

    def tick(self) -> None:
        self.clock.advance(self.rng.randint(0, 3000))
        self.log.roll_if_due(self.clock.time_ms())
        self.log.flush_if_due(self.clock.time_ms())

    def retention(self) -> None:
        before = self.log.log_start_offset
        self.log.apply_retention(self.clock.time_ms())
        after = self.log.log_start_offset
        assert before <= after <= self.model.end
        assert after == self.log.segments[0].base_offset or after == before
        self.model.log_start = after

    def delete_records(self) -> None:
        offset = self.rng.randint(0, self.model.end + 2)
        if offset > self.model.end:
            with pytest.raises(KafkaError) as e:
                self.log.delete_records_before(offset)
            assert e.value.code == ErrorCode.offset_out_of_range
            return
        self.model.log_start = max(self.model.log_start, offset)
        assert self.log.delete_records_before(offset) == self.model.log_start

    def reopen_clean(self) -> None:
        self.log.close()
        self.log = PartitionLog.open(self.directory, self.config, self.clock)

    def reopen_crashed(self) -> None:
        crash(self.log)
        self.log = PartitionLog.open(self.directory, self.config, self.clock)

    def torn_tail(self) -> None:
        crash(self.log)
        active = Path(self.directory) / f"{self.log.segments[-1].base_offset:020d}.log"
        with open(active, "ab") as f:
            f.write(make_batch([b"torn"] * 3)[: self.rng.randint(1, 80)])
        self.log = PartitionLog.open(self.directory, self.config, self.clock)

    def timestamp_lookup(self) -> None:
        target = self.clock.time_ms() + self.rng.randint(-4000, 600)
        found = self.log.offset_for_timestamp(target)
        expected = None
        for offset in range(self.model.log_start, self.model.end):
            ts = self.model.record(offset)[1]
            if ts >= target:
                expected = (offset, ts)
                break
        assert found == expected

    def truncate(self) -> None:
        if self.model.end == self.model.log_start:
            return
        offset = self.rng.randint(max(0, self.model.log_start - 2), self.model.end)
        first_segment_base = self.log.segments[0].base_offset
        self.log.truncate_to(offset)
        if offset < self.model.end:
            self.model.truncate(offset, first_segment_base)


def _split(data: bytes) -> list[tuple[int, list[tuple[bytes, int]]]]:
    out = []
    records = MemoryRecords(data)
    position = 0
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        header = parse_header(data, position)
        position += header.total_size
        out.append((batch.base_offset, [(bytes(r.value), r.timestamp) for r in batch]))
    assert position == len(data)  # whole batches only
    return out


@pytest.mark.parametrize("seed", range(12))
def test_random_operations_match_the_model(tmp_path: Path, seed: int) -> None:
    Fuzzer(seed, tmp_path).run(250)
