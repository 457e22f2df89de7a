"""Compaction removes transaction markers once their transaction left nothing behind and their delete horizon
passed (Kafka's rule), and a log without them still reads and reopens correctly."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from moldau.clock import ManualClock
from moldau.protocol.record_batch import BATCH_HEADER_SIZE, BatchHeader, iter_batch_headers, split_batches
from moldau.storage.batch_rewrite import delete_horizon_ms
from moldau.storage.checkpoints import RECOVERY_POINT_FILE, write_offset_checkpoint
from moldau.storage.cleaner import LogCleaner
from moldau.storage.control_batch import parse_marker
from moldau.storage.log import PartitionLog
from moldau.storage.offset_map import ENTRY_COST_BYTES
from moldau.storage.producer_state import snapshot_offsets
from moldau.storage.segment import LOG_SUFFIX, segment_path
from tests.unit.storage.batches import START_MS
from tests.unit.storage.conftest import OpenLog, crash
from tests.unit.storage.test_cleaner import crash_while_cleaning, make_cleaner, stored_batches

RETENTION_MS = 10_000
CONFIG: dict[str, Any] = {"cleanup_policy": ("compact",), "min_cleanable_dirty_ratio": 0.0, "segment_bytes": 300,
                          "delete_retention_ms": RETENTION_MS}

Marker = tuple[int, int, bool, int | None]  # offset, producer id, commit, delete horizon


# -- helpers -----------------------------------------------------------------------------------------


class Producer:
    """A transactional producer writing straight to a log, with its markers as the coordinator writes them."""

    def __init__(self, log: PartitionLog, producer_id: int, *, sequenced: bool = True) -> None:
        self.log, self.producer_id, self.sequenced = log, producer_id, sequenced
        self.sequence = 0

    def send(self, records: list[tuple[bytes, bytes | None]]) -> int:
        """One transactional batch; returns its first offset."""
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=True, producer_id=self.producer_id, producer_epoch=0,
            base_sequence=self.sequence if self.sequenced else -1, batch_size=1 << 30)
        for i, (key, value) in enumerate(records):
            builder.append(i, START_MS, key, value, [])
        if self.sequenced:
            self.sequence += len(records)
        self.log.transaction_verification = False  # no transaction coordinator here
        return self.log.append(split_batches(bytes(builder.build())), 0).first_offset

    def end(self, commit: bool) -> int:
        """The marker; returns its offset."""
        return self.log.append_marker(self.producer_id, 0, commit, 0, 0).first_offset

    def transaction(self, records: list[tuple[bytes, bytes | None]], commit: bool = True) -> tuple[int, int]:
        """(first offset, marker offset) of a transaction of one batch."""
        return self.send(records), self.end(commit)


def plain(log: PartitionLog, records: list[tuple[bytes, bytes | None]], pad: int = 0) -> int:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, (key, value) in enumerate(records):
        builder.append(i, START_MS, key, None if value is None else value + b"." * pad, [])
    return log.append(split_batches(bytes(builder.build())), 0).first_offset


def roll(log: PartitionLog, *, lasting: bool = False) -> None:
    """Append filler until every batch so far lies in a non-active segment, where cleaning reaches. Filler has
    one key, so it compacts to one record, unless `lasting`: then each has a key of its own and fills a
    segment, which therefore never joins another when cleaned."""
    end = log.log_end_offset
    while log.segments[-1].base_offset < end:
        if lasting:
            plain(log, [(b"lasting-%d" % log.log_end_offset, b"f")], pad=220)
        else:
            plain(log, [(b"filler", b"f")], pad=100)


def markers(log: PartitionLog) -> list[Marker]:
    out = []
    for header, data in stored_batches(log):
        if header.is_control:
            marker = parse_marker(data)
            assert marker is not None
            out.append((header.base_offset, header.producer_id, marker.commit, delete_horizon_ms(header)))
    return out


def marker_offsets(log: PartitionLog) -> list[int]:
    return [m[0] for m in markers(log)]


def data_batches(log: PartitionLog, producer_id: int) -> list[BatchHeader]:
    return [h for h, _ in stored_batches(log) if not h.is_control and h.producer_id == producer_id]


def fetched_batches(log: PartitionLog, upper: int) -> Iterator[tuple[BatchHeader, bytes]]:
    offset = log.log_start_offset
    while offset < upper:
        data = log.read(offset, 1 << 20, True, upper).read_bytes()
        assert data, f"no batch at {offset} below {upper}"
        for position, header in iter_batch_headers(data, 0, len(data)):
            yield header, data[position : position + header.total_size]
            offset = header.next_offset


def read_committed(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) as a read_committed Kafka consumer returns them: up to the last stable offset,
    dropping a producer's transactional batches from an aborted transaction's first offset (the fetch
    response's list) until its abort marker."""
    upper = log.last_stable_offset
    pending = sorted(log.aborted_transactions(log.log_start_offset, upper), key=lambda t: t[1])
    aborted_producers: set[int] = set()
    out: list[tuple[int, bytes | None, bytes | None]] = []
    for header, data in fetched_batches(log, upper):
        if header.has_producer_id:
            while pending and pending[0][1] <= header.last_offset:
                aborted_producers.add(pending.pop(0)[0])
        if header.is_control:
            marker = parse_marker(data)
            if marker is not None and not marker.commit:
                aborted_producers.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborted_producers:
            continue
        out.extend((r.offset, r.key, r.value) for r in DefaultRecordBatch(data))
    return out


def latest(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes | None]:
    return {key: value for _, key, value in records}


def clean(cleaner: LogCleaner, log: PartitionLog, clock: ManualClock) -> None:
    """One cleaning, which must be due (dirty records or a passed horizon)."""
    assert cleaner.clean_now(log, clock.time_ms()) is not None


# -- when a marker goes ------------------------------------------------------------------------------


def test_a_committed_transactions_marker_goes_after_its_horizon_once_its_records_are_superseded(
        open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(**CONFIG)
    producer = Producer(log, 1)
    _, first_marker = producer.transaction([(b"a", b"1"), (b"b", b"1")])
    _, last_marker = producer.transaction([(b"c", b"1")])  # the producer's last batch: it and its marker stay
    plain(log, [(b"a", b"2"), (b"b", b"2")])
    roll(log)
    expected = latest(read_committed(log))
    cleaner = make_cleaner(clock, log)

    clean(cleaner, log, clock)
    assert markers(log) == [(first_marker, 1, True, START_MS + RETENTION_MS), (last_marker, 1, True, None)]
    assert [h.base_offset for h in data_batches(log, 1)] == [last_marker - 1]
    clock.advance(RETENTION_MS - 1)
    assert cleaner.clean_now(log, clock.time_ms()) is None, "nothing is due before the horizon"
    clock.advance(1)
    result = cleaner.clean_now(log, clock.time_ms())
    assert result is not None and result.markers_removed == 1
    assert marker_offsets(log) == [last_marker]
    assert latest(read_committed(log)) == expected
    assert log.last_stable_offset == log.high_watermark
    assert cleaner.clean_now(log, clock.time_ms()) is None, "a removed marker leaves nothing due"


def _spoil_marker_key(log: PartitionLog, offset: int) -> None:
    """Make the marker at `offset` unreadable on disk (its control key declared empty), with a valid CRC, as
    corruption the CRC does not catch would leave it."""
    for segment in log.segments:
        path = segment_path(segment.directory, segment.base_offset, LOG_SUFFIX)
        with open(path, "r+b") as f:
            data = bytearray(f.read())
            for position, header in iter_batch_headers(bytes(data), 0, len(data)):
                if header.is_control and header.base_offset == offset:
                    # record length, attributes, timestamp delta and offset delta take a byte each here
                    data[position + BATCH_HEADER_SIZE + 4] = 0  # key length 0 (zigzag)
                    batch = data[position : position + header.total_size]
                    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
                    data[position : position + header.total_size] = batch
                    f.seek(0)
                    f.write(data)
                    return
    raise AssertionError(f"no marker at {offset}")


def test_a_marker_the_cleaner_cannot_read_is_kept_as_it_is(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(**CONFIG)
    producer = Producer(log, 1)
    _, spoiled = producer.transaction([(b"a", b"1")])
    _, last_marker = producer.transaction([(b"c", b"1")])
    plain(log, [(b"a", b"2")])
    roll(log)
    _spoil_marker_key(log, spoiled)
    cleaner = make_cleaner(clock, log)
    for _ in range(2):
        cleaner.clean_now(log, clock.time_ms())
        clock.advance(RETENTION_MS)
    controls = [h.base_offset for h, _ in stored_batches(log) if h.is_control]
    assert controls == [spoiled, last_marker], "an unreadable marker stays, and the rest is cleaned around it"
    assert [h.base_offset for h in data_batches(log, 1)] == [last_marker - 1]


def test_an_aborted_transactions_marker_and_index_entry_go_after_its_records(open_log: OpenLog,
                                                                            clock: ManualClock) -> None:
    log = open_log(**CONFIG)
    producer = Producer(log, 2)
    plain(log, [(b"a", b"committed")])
    first, abort_marker = producer.transaction([(b"a", b"aborted"), (b"b", b"aborted")], commit=False)
    _, commit_marker = producer.transaction([(b"c", b"later")])
    roll(log)
    assert log.aborted_transactions(0, log.log_end_offset) == [(2, first)]
    expected = latest(read_committed(log))
    assert expected[b"a"] == b"committed" and b"b" not in expected
    cleaner = make_cleaner(clock, log)

    clean(cleaner, log, clock)
    assert [h.base_offset for h in data_batches(log, 2)] == [commit_marker - 1], "the aborted records went"
    assert markers(log)[0] == (abort_marker, 2, False, START_MS + RETENTION_MS)
    assert log.aborted_transactions(0, log.log_end_offset) == [(2, first)], "the entry stays with its marker"
    assert latest(read_committed(log)) == expected
    clock.advance(RETENTION_MS)
    clean(cleaner, log, clock)
    assert marker_offsets(log) == [commit_marker]
    # An entry without its marker would make a consumer drop the producer's later, committed records.
    assert log.aborted_transactions(0, log.log_end_offset) == []
    assert latest(read_committed(log)) == expected
    log.close()
    reopened = open_log(**CONFIG)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == []
    assert not [n for n in os.listdir(reopened.directory) if n.endswith((".txnindex", ".cleaned"))]
    assert latest(read_committed(reopened)) == expected


def test_with_no_delete_retention_a_marker_goes_in_the_second_cleaning(open_log: OpenLog,
                                                                       clock: ManualClock) -> None:
    log = open_log(**{**CONFIG, "delete_retention_ms": 0})
    producer = Producer(log, 1)
    _, doomed = producer.transaction([(b"a", b"1")])
    _, kept = producer.transaction([(b"b", b"1")])
    plain(log, [(b"a", b"2")])
    roll(log)
    cleaner = make_cleaner(clock, log)
    clean(cleaner, log, clock)
    assert markers(log)[0] == (doomed, 1, True, START_MS)
    clean(cleaner, log, clock)  # due: the horizon is now
    assert marker_offsets(log) == [kept]


def test_a_marker_stays_while_a_record_of_its_transaction_does(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(**CONFIG)
    producer = Producer(log, 1)
    _, marker = producer.transaction([(b"a", b"1"), (b"b", b"1")])
    producer.transaction([(b"c", b"1")])
    plain(log, [(b"a", b"2")])  # b stays
    roll(log)
    cleaner = make_cleaner(clock, log)
    for _ in range(3):
        cleaner.clean_now(log, clock.time_ms(), force=True)
        clock.advance(RETENTION_MS)
    assert markers(log)[0] == (marker, 1, True, None)
    assert latest(read_committed(log))[b"b"] == b"1"


def test_a_batch_kept_empty_for_producer_state_keeps_its_marker(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(**CONFIG)
    _, marker = Producer(log, 1).transaction([(b"a", b"1")])
    plain(log, [(b"a", b"2")])
    roll(log)
    cleaner = make_cleaner(clock, log)
    for _ in range(3):
        cleaner.clean_now(log, clock.time_ms(), force=True)
        clock.advance(RETENTION_MS)
    (batch,) = data_batches(log, 1)
    assert batch.records_count == 0, "the producer's last batch stays, empty"
    # Without its marker, the empty transactional batch would start a transaction nothing ends on a reload.
    assert markers(log) == [(marker, 1, True, None)]


def test_a_producers_last_batch_that_is_a_marker_stays_until_the_producer_expires(open_log: OpenLog,
                                                                                  clock: ManualClock) -> None:
    log = open_log(**CONFIG)
    # A coordinator's transactional writes have no sequence numbers: the producer's last batch is its marker.
    _, marker = Producer(log, 5, sequenced=False).transaction([(b"a", b"1")])
    plain(log, [(b"a", b"2")])
    roll(log)
    cleaner = make_cleaner(clock, log)
    clean(cleaner, log, clock)
    clock.advance(RETENTION_MS)
    cleaner.clean_now(log, clock.time_ms(), force=True)
    assert data_batches(log, 5) == []
    assert markers(log) == [(marker, 5, True, None)], "it holds the producer's epoch"
    clock.advance(log.producer_state.producer_id_expiration_ms)
    assert log.expire_producers(clock.time_ms()) >= 1
    cleaner.clean_now(log, clock.time_ms(), force=True)
    assert markers(log) == [(marker, 5, True, clock.time_ms() + RETENTION_MS)]
    clock.advance(RETENTION_MS)
    clean(cleaner, log, clock)
    assert markers(log) == []


def test_markers_beyond_where_mapping_stopped_are_left_for_a_later_pass(open_log: OpenLog,
                                                                        clock: ManualClock) -> None:
    """A full offset map stops a cleaning partway; a transaction with a batch at or beyond that point has
    records kept, and the markers there are not looked at yet."""
    log = open_log(**{**CONFIG, "delete_retention_ms": 0})
    producers = [Producer(log, 10 + i) for i in range(3)]
    transactions: list[tuple[int, list[int], int]] = []  # producer id, batch offsets, marker offset
    for round_ in range(8):
        for i, producer in enumerate(producers):
            keys = [b"k%d-%d" % (i, k) for k in range(4)]
            batches = [producer.send([(key, b"r%d" % round_) for key in keys[:2]]),
                       producer.send([(key, b"r%d" % round_) for key in keys[2:]])]
            transactions.append((producer.producer_id, batches, producer.end(commit=round_ % 3 != 0)))
    roll(log)
    expected = latest(read_committed(log))
    cleaner = make_cleaner(clock, log, dedupe_buffer_bytes=10 * ENTRY_COST_BYTES)
    clean_ends: list[int] = []
    for _ in range(40):
        result = cleaner.clean_now(log, clock.time_ms())
        if result is None:
            break
        clean_ends.append(result.clean_end_offset)
        stored = {h.base_offset for h, _ in stored_batches(log)}
        for _, batches, marker in transactions:
            if marker not in stored:
                assert not stored & set(batches), "a marker went while a batch of its transaction stays"
        assert latest(read_committed(log)) == expected
        abort_markers = {o for o, _, commit, _ in markers(log) if not commit}
        assert all(e.last_offset in abort_markers for e in log.aborted_transaction_entries(0, log.log_end_offset))
    else:
        pytest.fail("cleaning never settled")
    assert clean_ends[0] < clean_ends[-1], "the map never filled up"
    last_of_producer = {pid: marker for pid, _, marker in transactions}
    assert sorted(marker_offsets(log)) == sorted(last_of_producer.values())


# -- reloading a log whose markers went --------------------------------------------------------------


def _log_with_a_removed_marker(open_log: OpenLog, clock: ManualClock) -> tuple[PartitionLog, Producer, int]:
    """A committed transaction whose batch and marker lie in different segments, so that the producer-state
    snapshot taken at the roll between them holds the transaction as ongoing; its producer then expires and
    cleaning removes everything it wrote. Returns the log, the producer and the base offset of the segment the
    marker was in (still a segment base after cleaning)."""
    log = open_log(**{**CONFIG, "delete_retention_ms": 0})
    producer = Producer(log, 1)
    producer.send([(b"a", b"1"), (b"b", b"1")])
    roll(log, lasting=True)
    marker = producer.end(commit=True)
    marker_segment = log.segments[-1].base_offset
    assert 0 < marker_segment <= marker and marker_segment in snapshot_offsets(log.directory)
    plain(log, [(b"a", b"2"), (b"b", b"2")])
    roll(log, lasting=True)
    clock.advance(log.producer_state.producer_id_expiration_ms)
    assert log.expire_producers(clock.time_ms()) == 1  # nothing keeps its last batch any more
    cleaner = make_cleaner(clock, log)
    clean(cleaner, log, clock)
    clean(cleaner, log, clock)
    assert markers(log) == [] and data_batches(log, 1) == []
    assert marker_segment in [s.base_offset for s in log.segments]
    return log, producer, marker_segment


def _assert_no_transaction_open(log: PartitionLog, producer: Producer) -> None:
    assert log.ongoing_transactions() == []
    assert log.last_stable_offset == log.high_watermark == log.log_end_offset
    producer.log = log
    first, _ = producer.transaction([(b"c", b"1")])
    assert log.last_stable_offset == log.log_end_offset
    records = latest(read_committed(log))
    assert {k: v for k, v in records.items() if k is not None and not k.startswith(b"lasting")} == \
        {b"a": b"2", b"b": b"2", b"c": b"1"}
    assert log.aborted_transactions(0, log.log_end_offset) == []
    assert first > 0


def test_a_log_whose_marker_went_reopens_without_an_ongoing_transaction(open_log: OpenLog,
                                                                        clock: ManualClock) -> None:
    log, producer, _ = _log_with_a_removed_marker(open_log, clock)
    log.close()
    _assert_no_transaction_open(open_log(**{**CONFIG, "delete_retention_ms": 0}), producer)


@pytest.mark.parametrize("recovery_point", ["marker segment", "log start"])
def test_a_log_whose_marker_went_recovers_without_an_ongoing_transaction(open_log: OpenLog, clock: ManualClock,
                                                                         recovery_point: str) -> None:
    """After a crash, producer state is replayed from the newest snapshot at or below the recovery point; the
    snapshot taken inside the transaction (which the marker used to end) must not be that one."""
    log, producer, marker_segment = _log_with_a_removed_marker(open_log, clock)
    crash(log)
    write_offset_checkpoint(log.directory, RECOVERY_POINT_FILE,
                            marker_segment if recovery_point == "marker segment" else 0)
    _assert_no_transaction_open(open_log(clean_shutdown=False, **{**CONFIG, "delete_retention_ms": 0}), producer)


@pytest.mark.parametrize("step", ["before-commit", "after-commit", "before-install", "half-install"])
def test_a_crash_while_swapping_in_a_segment_without_a_marker_keeps_the_index_consistent(
        open_log: OpenLog, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    config = {**CONFIG, "segment_bytes": 100_000}  # one group, cleaned in one segment
    log = open_log(**config)
    doomed, kept = Producer(log, 1), Producer(log, 2)
    doomed_first, doomed_marker = doomed.transaction([(b"a", b"aborted")], commit=False)
    doomed.transaction([(b"z", b"1")])
    kept_first, kept_marker = kept.transaction([(b"b", b"aborted")], commit=False)  # its last batch: stays
    log._roll(clock.time_ms())
    plain(log, [(b"x", b"1")])
    cleaner = make_cleaner(clock, log)
    clean(cleaner, log, clock)
    assert [m[0] for m in markers(log) if m[3] is not None] == [doomed_marker]
    expected = latest(read_committed(log))
    clock.advance(RETENTION_MS)
    crash_while_cleaning(cleaner, log, clock, monkeypatch, step)
    reopened = open_log(clean_shutdown=False, **config)
    aborted = reopened.aborted_transactions(0, reopened.log_end_offset)
    if step == "before-commit":
        assert doomed_marker in marker_offsets(reopened)
        # Recovery rebuilds the index from the log, where the aborted records are gone: the entry may go.
        assert aborted in ([(1, doomed_first), (2, kept_first)], [(2, kept_first)])
    else:
        assert doomed_marker not in marker_offsets(reopened)
        assert aborted == [(2, kept_first)], "the cleaned index is installed with the swap"
    assert kept_marker in marker_offsets(reopened)
    assert latest(read_committed(reopened)) == expected
    assert reopened.last_stable_offset == reopened.log_end_offset
    assert not [n for n in os.listdir(reopened.directory) if n.endswith((".cleaned", ".swap"))]
