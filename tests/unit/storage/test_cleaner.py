"""Log compaction on real files: what stays, what goes, when, and that every step leaves a consistent log."""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import BatchHeader, crc_matches, iter_batch_headers, parse_header, split_batches
from moldau.protocol.record_codec import decode_batch
from moldau.storage import segment_swap
from moldau.storage.batch_rewrite import (
    DELETE_HORIZON_BIT,
    delete_horizon_ms,
    empty_batch,
    rebuild_batch,
)
from moldau.storage.cleaner import CHECKPOINT_FILE, CleanerSettings, LogCleaner
from moldau.storage.compactor import CompactionResult
from moldau.storage.log import PartitionLog
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager
from moldau.storage.offset_map import ENTRY_COST_BYTES
from tests.unit.storage.batches import START_MS
from tests.unit.storage.conftest import OpenLog, crash

Rec = tuple[bytes | None, bytes | None]  # (key, value); value None is a tombstone
# What a reader sees of one record: key, value, timestamp, headers.
Seen = tuple[bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]

COMPACT = {"cleanup_policy": ("compact",), "min_cleanable_dirty_ratio": 0.0}


# -- helpers -----------------------------------------------------------------------------------------


def keyed_batch(records: list[Rec], *, timestamp_ms: int = START_MS, compression: int = 0,
                headers: list[tuple[str, bytes | None]] | None = None, producer: tuple[int, int, int] | None = None,
                ) -> bytes:
    pid, epoch, seq = producer if producer is not None else (-1, -1, -1)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                        batch_size=1 << 30)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp_ms + i, key, value, headers or [])
    return bytes(builder.build())


def append(log: PartitionLog, records: list[Rec], **kwargs: Any) -> int:
    """Append one batch; returns its first offset."""
    return log.append(split_batches(keyed_batch(records, **kwargs)), 0).first_offset


def stored_batches(log: PartitionLog) -> Iterator[tuple[BatchHeader, bytes]]:
    for segment in log.segments:
        data = segment.read_bytes(0, segment.size_bytes)
        for position, header in iter_batch_headers(data, 0, len(data)):
            yield header, data[position : position + header.total_size]


def read_all(log: PartitionLog) -> dict[int, Seen]:
    """offset -> record, read through fetches as a consumer would, checking batch and offset invariants."""
    out: dict[int, Seen] = {}
    offset, last = log.log_start_offset, -1
    while offset < log.high_watermark:
        data = log.read(offset, 1 << 20, True).read_bytes()
        assert data, f"no batch at {offset} below the high watermark {log.high_watermark}"
        for position, header in iter_batch_headers(data, 0, len(data)):
            batch = data[position : position + header.total_size]
            for r in DefaultRecordBatch(batch):
                assert header.base_offset <= r.offset <= header.last_offset
                assert r.offset > last, "offsets must strictly increase"
                last = r.offset
                out[r.offset] = (r.key, r.value, r.timestamp, tuple(r.headers))
            offset = header.next_offset
    return out


def latest_per_key(records: dict[int, Seen]) -> dict[bytes | None, tuple[int, Seen]]:
    latest: dict[bytes | None, tuple[int, Seen]] = {}
    for offset in sorted(records):
        latest[records[offset][0]] = (offset, records[offset])
    return latest


def make_cleaner(clock: ManualClock, log: PartitionLog, *, executor: Executor | None = None,
                 **settings: Any) -> LogCleaner:
    """A cleaner of `log` alone with `settings` (CleanerSettings' fields). Unless told otherwise it looks for
    work at every poll (tests poll with a clock that may not move), and a given `dedupe_buffer_bytes` is filled
    to its last entry."""
    settings.setdefault("backoff_ms", 0)
    if "dedupe_buffer_bytes" in settings:
        settings.setdefault("dedupe_load_factor", 1.0)
    return LogCleaner(clock, lambda: {(log.topic, log.partition): log}, CleanerSettings(**settings),
                      executor=executor)


class InlineExecutor(Executor):
    """Runs each job at submit time, in the caller's thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:
            future.set_exception(e)
        return future


class HeldExecutor(Executor):
    """Holds submitted jobs until `run` executes them in a real thread: lets a test act in between."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()  # as if a worker had picked it up: it can no longer be cancelled
        self.jobs.append((future, fn, args))
        return future

    def run(self) -> None:
        def work() -> None:
            for future, fn, args in self.jobs:
                try:
                    future.set_result(fn(*args))
                except BaseException as e:
                    future.set_exception(e)

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        self.jobs.clear()


def updates(keys: int, rounds: int, prefix: str = "v", pad: int = 0) -> list[list[Rec]]:
    """`rounds` batches, each updating keys k0..k{keys-1} once (values padded with `pad` bytes)."""
    return [[(b"k%d" % k, f"{prefix}{r}-{k}".encode() + b"x" * pad) for k in range(keys)] for r in range(rounds)]


# -- batch rewriting ---------------------------------------------------------------------------------


def test_rebuilding_a_whole_uncompressed_batch_reproduces_it_byte_for_byte() -> None:
    raw = keyed_batch([(b"a", b"1"), (b"b", None), (b"c", b"3")], headers=[("h", b"x"), ("n", None)])
    header = parse_header(raw)
    assert rebuild_batch(header, decode_batch(raw), None) == raw


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_a_rebuilt_batch_keeps_offsets_codec_and_the_last_offset(compression: int) -> None:
    raw = keyed_batch([(b"k%d" % i, b"value-%d" % i * 5) for i in range(6)], compression=compression,
                      headers=[("trace", b"abc")], producer=(9, 2, 40))
    stored = split_batches(raw)[0][0]
    kept = [r for r in decode_batch(raw) if r.offset in (1, 3)]
    rebuilt = rebuild_batch(stored, kept, None)
    header = parse_header(rebuilt)
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (0, 5, 2)
    assert (header.compression, header.producer_id, header.producer_epoch, header.base_sequence) == \
        (compression, 9, 2, 40)
    assert crc_matches(rebuilt, header) and header.total_size == len(rebuilt)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in decode_batch(rebuilt)] == \
        [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in kept]


def test_a_delete_horizon_keeps_record_timestamps() -> None:
    raw = keyed_batch([(b"a", None), (b"b", b"2")], timestamp_ms=START_MS)
    header = parse_header(raw)
    rebuilt = rebuild_batch(header, decode_batch(raw), START_MS + 86_400_000)
    rebuilt_header = parse_header(rebuilt)
    assert rebuilt_header.attributes & DELETE_HORIZON_BIT
    assert delete_horizon_ms(rebuilt_header) == START_MS + 86_400_000
    assert [r.timestamp for r in DefaultRecordBatch(rebuilt)] == [START_MS, START_MS + 1]
    assert rebuilt_header.max_timestamp == START_MS + 1


def test_an_empty_batch_keeps_offsets_and_producer_fields() -> None:
    header = parse_header(keyed_batch([(b"a", b"1"), (b"b", b"2")], compression=1, producer=(5, 0, 7)))
    empty = parse_header(empty_batch(header))
    assert (empty.records_count, empty.last_offset_delta, empty.compression) == (0, 1, 0)
    assert (empty.producer_id, empty.base_sequence, empty.last_sequence) == (5, 7, 8)
    assert list(DefaultRecordBatch(empty_batch(header))) == []


# -- what stays and what goes ------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_the_latest_value_per_key_stays_at_its_offset(open_log: OpenLog, clock: ManualClock,
                                                      compression: int) -> None:
    log = open_log(segment_bytes=2500 if compression == 0 else 400, **COMPACT)  # compressed batches are small
    # The last full update is partly superseded by the one after: its batch must be rewritten.
    last: list[Rec] = [(b"k0", b"y" * 200), (b"k1", b"y" * 200)]
    filler: list[list[Rec]] = [[(b"z", b"z" * 200)]] * 6
    for batch in [*updates(keys=4, rounds=12, pad=200), last, *filler]:
        append(log, batch, compression=compression, headers=[("h", b"x")], timestamp_ms=clock.time_ms())
    before, end = read_all(log), log.log_end_offset
    codecs = {h.base_offset: h.compression for h, _ in stored_batches(log)}
    active_base = log.segments[-1].base_offset
    result = make_cleaner(clock, log).clean_now(log, clock.time_ms())
    assert result is not None and result.records_removed > 0
    after = read_all(log)
    assert log.log_end_offset == end
    assert all(before[o] == seen for o, seen in after.items()), "a remaining offset changed its record"
    assert latest_per_key(after) == latest_per_key(before)
    cleaned = [o for o in after if o < active_base]
    assert len({after[o][0] for o in cleaned}) == len(cleaned), "a key appears twice in the cleaned part"
    assert all(o in after for o in before if o >= active_base), "the active segment was touched"
    assert all(codecs[h.base_offset] == h.compression for h, _ in stored_batches(log) if h.records_count)
    assert compression == 0 or any(h.compression == compression and h.records_count < 4
                                   for h, _ in stored_batches(log)), "no rewritten batch kept the codec"


def test_the_active_segment_is_never_cleaned(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(**COMPACT)
    for batch in updates(keys=3, rounds=5):
        append(log, batch)
    active = Path(log.directory) / f"{log.segments[-1].base_offset:020d}.log"
    content = active.read_bytes()
    assert make_cleaner(clock, log).clean_now(log, clock.time_ms(), force=True) is None
    assert active.read_bytes() == content
    assert len(read_all(log)) == 15


def test_records_without_a_key_are_refused_on_compacted_logs_only(open_log: OpenLog) -> None:
    compacted = open_log(**COMPACT)
    with pytest.raises(KafkaError) as e:
        append(compacted, [(b"k", b"1"), (None, b"2")], compression=3)
    assert e.value.code == ErrorCode.invalid_record
    assert compacted.log_end_offset == 0
    plain = open_log(name="plain-0")
    assert append(plain, [(None, b"2")]) == 0


def test_tombstones_stay_for_delete_retention_after_their_first_cleaning(open_log: OpenLog,
                                                                       clock: ManualClock) -> None:
    log = open_log(segment_bytes=300, delete_retention_ms=10_000, **COMPACT)
    append(log, [(b"gone", b"old"), (b"kept", b"1")])
    append(log, [(b"gone", None)])
    for batch in updates(keys=2, rounds=4):
        append(log, batch)
    cleaner = make_cleaner(clock, log, executor=InlineExecutor())
    cleaner.clean_now(log, clock.time_ms())
    seen = read_all(log)
    assert [s[1] for s in seen.values() if s[0] == b"gone"] == [None], "the tombstone stays, the value goes"
    horizons = {delete_horizon_ms(h) for h, _ in stored_batches(log) if h.base_offset == 2}
    assert horizons == {clock.time_ms() + 10_000}
    clock.advance(9_999)
    assert cleaner.clean_now(log, clock.time_ms(), force=True) is not None
    assert any(s[0] == b"gone" for s in read_all(log).values())
    clock.advance(2)
    cleaner.poll(clock.time_ms())  # nothing is dirty: the passed horizon alone makes the log due
    cleaner.poll(clock.time_ms())
    assert not any(s[0] == b"gone" for s in read_all(log).values())
    assert b"kept" in {s[0] for s in read_all(log).values()}


def test_min_compaction_lag_keeps_young_segments_dirty(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_bytes=300, min_compaction_lag_ms=60_000, **COMPACT)
    for batch in updates(keys=2, rounds=8):
        append(log, batch, timestamp_ms=clock.time_ms())
    cleaner = make_cleaner(clock, log)
    assert cleaner.cleanable_range(log, clock.time_ms()).dirty_bytes == 0
    assert cleaner.clean_now(log, clock.time_ms()) is None
    assert len(read_all(log)) == 16
    clock.advance(60_001)
    assert cleaner.clean_now(log, clock.time_ms()) is not None
    assert len(read_all(log)) < 16


def test_the_dirty_ratio_decides_when_a_log_is_cleaned(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_bytes=400, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.5)
    for r in range(10):
        append(log, [(b"k%d" % (r * 10 + k), b"v" * 20) for k in range(3)])  # distinct keys: nothing to drop
    cleaner = make_cleaner(clock, log)
    assert cleaner.cleanable_range(log, clock.time_ms()).dirty_ratio == 1.0
    assert cleaner.clean_now(log, clock.time_ms()) is not None
    assert cleaner.cleanable_range(log, clock.time_ms()).dirty_bytes == 0
    append(log, [(b"k0", b"new")])
    append(log, [(b"k1", b"new")])
    ratio = cleaner.cleanable_range(log, clock.time_ms()).dirty_ratio
    assert 0 < ratio < 0.5
    assert cleaner.clean_now(log, clock.time_ms()) is None
    while cleaner.cleanable_range(log, clock.time_ms()).dirty_ratio < 0.5:
        append(log, [(b"k2", b"x" * 30)])
    assert cleaner.clean_now(log, clock.time_ms()) is not None
    assert [s[1] for s in read_all(log).values() if s[0] == b"k0"] == [b"new"]


def test_max_compaction_lag_forces_cleaning_and_rolls_the_active_segment(open_log: OpenLog,
                                                                        clock: ManualClock) -> None:
    log = open_log(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=5_000)
    for batch in updates(keys=2, rounds=3):
        append(log, batch, timestamp_ms=clock.time_ms())
    cleaner = make_cleaner(clock, log)
    clock.advance(5_001)
    assert log.roll_if_due(clock.time_ms()), "max.compaction.lag.ms bounds the active segment's age"
    append(log, [(b"k0", b"last")], timestamp_ms=clock.time_ms())
    assert cleaner.cleanable_range(log, clock.time_ms()).max_lag_exceeded
    assert cleaner.clean_now(log, clock.time_ms()) is not None
    assert len(read_all(log)) == 3


def test_an_idempotent_producers_last_batch_survives_as_an_empty_batch(open_log: OpenLog,
                                                                     clock: ManualClock) -> None:
    log = open_log(segment_bytes=200, **COMPACT)
    producer_batch = keyed_batch([(b"a", b"1"), (b"b", b"2")], producer=(7, 0, 0))
    log.append(split_batches(producer_batch), 0)
    for batch in updates(keys=2, rounds=1) + [[(b"a", b"3"), (b"b", b"4")]] * 2:
        append(log, [(k.replace(b"k0", b"a").replace(b"k1", b"b") if k else k, v) for k, v in batch])
    make_cleaner(clock, log).clean_now(log, clock.time_ms())
    first = next(stored_batches(log))[0]
    assert (first.producer_id, first.records_count, first.last_offset) == (7, 0, 1)
    log.close()
    for name in os.listdir(log.directory):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(log.directory, name))
    reopened = open_log(clean_shutdown=False, segment_bytes=200, **COMPACT)
    assert reopened.producer_state.producers[7].last_seq == 1
    assert reopened.append(split_batches(producer_batch), 0).duplicate


def test_a_small_offset_map_cleans_in_several_passes(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_bytes=500, **COMPACT)
    for batch in updates(keys=30, rounds=6):
        append(log, batch)
    expected = latest_per_key(read_all(log))
    cleaner = make_cleaner(clock, log, dedupe_buffer_bytes=40 * ENTRY_COST_BYTES)
    passes = 0
    while cleaner.clean_now(log, clock.time_ms()) is not None:
        passes += 1
        assert latest_per_key(read_all(log)) == expected
        assert passes < 20
    assert passes > 1
    cleaned_end = log.segments[-1].base_offset
    keys = [s[0] for o, s in read_all(log).items() if o < cleaned_end]
    assert len(keys) == len(set(keys))


def test_the_checkpoint_survives_a_restart(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_bytes=400, **COMPACT)
    for batch in updates(keys=3, rounds=6):
        append(log, batch)
    make_cleaner(clock, log).clean_now(log, clock.time_ms())
    log.close()
    reopened = open_log(segment_bytes=400, **COMPACT)
    assert make_cleaner(clock, reopened).cleanable_range(reopened, clock.time_ms()).dirty_bytes == 0


# -- concurrency and crashes -------------------------------------------------------------------------


def test_appends_while_the_thread_cleans_are_kept(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_bytes=400, **COMPACT)
    for batch in updates(keys=3, rounds=6):
        append(log, batch)
    executor = HeldExecutor()
    cleaner = make_cleaner(clock, log, executor=executor)
    cleaner.poll(clock.time_ms())
    assert cleaner.busy
    slice_before = log.read(0, 1 << 20, True).slices[0]
    old_bytes = slice_before.read_bytes()
    for batch in updates(keys=4, rounds=4, prefix="new"):
        append(log, batch)
    expected = read_all(log)
    executor.run()
    cleaner.poll(clock.time_ms())
    after = read_all(log)
    assert latest_per_key(after) == latest_per_key(expected)
    assert all(expected[o] == seen for o, seen in after.items())
    assert all(o in after for o in expected if o >= 18), "records appended during the cleaning are kept"
    assert len(after) < len(expected)
    assert slice_before.read_bytes() == old_bytes, "a fetch holding the replaced segment still reads it"


def test_segments_deleted_while_cleaning_are_not_swapped_back(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_bytes=300, cleanup_policy=("compact", "delete"), min_cleanable_dirty_ratio=0.0)
    for batch in updates(keys=2, rounds=10):
        append(log, batch)
    executor = HeldExecutor()
    cleaner = make_cleaner(clock, log, executor=executor)
    cleaner.poll(clock.time_ms())
    start = log.delete_records_before(log.segments[2].base_offset)
    executor.run()
    cleaner.poll(clock.time_ms())
    assert log.segments[0].base_offset == start
    after = read_all(log)
    assert min(after) >= start
    leftovers = [n for n in os.listdir(log.directory) if n.endswith((".cleaned", ".swap"))]
    assert leftovers == []


def test_stopping_cancels_a_running_cleaning_and_leaves_no_files(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_bytes=300, **COMPACT)
    for batch in updates(keys=2, rounds=10):
        append(log, batch)
    executor = HeldExecutor()
    cleaner = make_cleaner(clock, log, executor=executor)
    cleaner.poll(clock.time_ms())
    before = read_all(log)
    stopper = threading.Timer(0.0, executor.run)
    stopper.start()
    cleaner.stop()
    stopper.join()
    assert read_all(log) == before
    assert not [n for n in os.listdir(log.directory) if n.endswith((".cleaned", ".swap"))]


def test_a_real_cleaner_thread_runs_beside_appends(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_bytes=500, **COMPACT)
    cleaner = make_cleaner(clock, log)
    try:
        for r in range(60):
            append(log, [(b"k%d" % (r % 7), b"v%d" % r), (b"k%d" % ((r + 3) % 7), b"w%d" % r)])
            cleaner.poll(clock.time_ms())
        expected_latest = {k: v[1][1] for k, v in latest_per_key(read_all(log)).items()}
        for _ in range(200):
            cleaner.poll(clock.time_ms())
            if not cleaner.busy and cleaner.cleanable_range(log, clock.time_ms()).dirty_bytes == 0:
                break
            threading.Event().wait(0.01)
    finally:
        cleaner.stop()
    after = read_all(log)
    assert {k: v[1][1] for k, v in latest_per_key(after).items()} == expected_latest
    assert len(after) < 120


def crash_while_cleaning(cleaner: LogCleaner, log: PartitionLog, clock: ManualClock,
                         monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """Clean `log`, crashing at `step` of the swap, then crash the log itself (no clean shutdown)."""
    _crash_at(step, monkeypatch)
    with pytest.raises(Exception, match=step):
        cleaner.clean_now(log, clock.time_ms())
    monkeypatch.undo()
    crash(log)


def _crash_at(step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    class Crash(Exception):
        pass

    def boom(*_: Any) -> None:
        raise Crash(step)

    if step == "partway-delete":
        original = segment_swap._delete_replaced

        def delete_one(directory: str, replaced: list[int]) -> None:
            original(directory, replaced[1:2])
            raise Crash(step)

        monkeypatch.setattr(segment_swap, "_delete_replaced", delete_one)
    elif step == "before-commit":
        monkeypatch.setattr(segment_swap, "_commit", boom)
    elif step == "after-commit":
        monkeypatch.setattr(segment_swap, "_delete_replaced", boom)
    elif step == "before-install":
        monkeypatch.setattr(segment_swap, "_install", boom)
    elif step == "half-install":
        def rename_indexes_only(directory: str, base: int) -> None:
            for suffix in (".index", ".timeindex"):
                os.replace(segment_swap.cleaned_path(directory, base, suffix),
                           os.path.join(directory, f"{base:020d}{suffix}"))
            raise Crash(step)

        monkeypatch.setattr(segment_swap, "_install", rename_indexes_only)


@pytest.mark.parametrize("step", ["before-commit", "after-commit", "partway-delete", "before-install",
                                  "half-install"])
def test_a_crash_during_the_swap_leaves_a_log_that_reads_correctly(
        open_log: OpenLog, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    config: dict[str, Any] = {"segment_bytes": 2000, **COMPACT}
    log = open_log(**config)
    for batch in updates(keys=3, rounds=40):
        append(log, batch, compression=4)
    before, end = read_all(log), log.log_end_offset
    crash_while_cleaning(make_cleaner(clock, log), log, clock, monkeypatch, step)
    reopened = open_log(clean_shutdown=False, **config)
    after = read_all(reopened)
    assert reopened.log_end_offset == end
    assert latest_per_key(after) == latest_per_key(before)
    assert all(before[o] == seen for o, seen in after.items())
    if step != "before-commit":
        assert len(after) < len(before), "a committed swap is rolled forward"
    assert not [n for n in os.listdir(reopened.directory) if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert make_cleaner(clock, reopened).clean_now(reopened, clock.time_ms(), force=True) is not None
    assert latest_per_key(read_all(reopened)) == latest_per_key(before)
    append(reopened, [(b"k0", b"after")])
    assert reopened.log_end_offset == end + 1


def test_a_crash_while_writing_cleaned_files_leaves_only_leftovers(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_bytes=400, **COMPACT)
    for batch in updates(keys=3, rounds=6):
        append(log, batch)
    before = read_all(log)
    base = log.segments[0].base_offset
    for suffix in (".log", ".index", ".timeindex"):
        Path(segment_swap.cleaned_path(log.directory, base, suffix)).write_bytes(b"\x00" * 50)
    crash(log)
    reopened = open_log(clean_shutdown=False, segment_bytes=400, **COMPACT)
    assert read_all(reopened) == before
    assert not [n for n in os.listdir(reopened.directory) if n.endswith(".cleaned")]


# -- the model check ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_random_appends_and_cleanings_match_the_model(open_log: OpenLog, clock: ManualClock, seed: int) -> None:
    rng = random.Random(seed)
    config: dict[str, Any] = {"segment_bytes": rng.choice([400, 900, 3000]), "delete_retention_ms": 5_000,
                              "cleanup_policy": ("compact",), "min_cleanable_dirty_ratio": rng.random()}
    log = open_log(**config)
    cleaner = make_cleaner(clock, log, dedupe_buffer_bytes=rng.choice([8, 10_000]) * ENTRY_COST_BYTES)
    keys = [b"key-%d" % i for i in range(rng.randint(3, 25))]
    model: dict[bytes, bytes | None] = {}
    appended: dict[int, Seen] = {}
    for step in range(120):
        clock.advance(rng.randint(0, 400))
        batch: list[Rec] = [(rng.choice(keys), None if rng.random() < 0.15 else rng.randbytes(rng.randint(0, 30)))
                            for _ in range(rng.randint(1, 6))]
        header = ("step", str(step).encode())
        first = append(log, batch, compression=rng.choice([0, 0, 1, 3, 4]), timestamp_ms=clock.time_ms(),
                       headers=[header])
        for i, (key, value) in enumerate(batch):
            assert key is not None
            appended[first + i] = (key, value, clock.time_ms() + i, (header,))
            model[key] = value
        if rng.random() < 0.25:
            result = cleaner.clean_now(log, clock.time_ms(), force=rng.random() < 0.3)
            if result is not None:
                _check_against_model(log, model, appended, result)
        if rng.random() < 0.05:
            log.close()
            log = open_log(**config)
            cleaner = make_cleaner(clock, log, dedupe_buffer_bytes=cleaner.settings.dedupe_buffer_bytes)
    clock.advance(10_000)
    result = cleaner.clean_now(log, clock.time_ms(), force=True)
    assert result is not None
    _check_against_model(log, model, appended, result)


def _check_against_model(log: PartitionLog, model: dict[bytes, bytes | None], appended: dict[int, Seen],
                         result: CompactionResult) -> None:
    seen = read_all(log)
    assert all(appended[o] == s for o, s in seen.items()), "a remaining offset maps to another record"
    latest = latest_per_key(seen)
    for key, value in model.items():
        if key in latest:
            assert latest[key][1][1] == value, key
        else:
            assert value is None, f"{key!r} lost its latest value"
    assert log.log_end_offset == max(appended) + 1
    below = [s[0] for o, s in seen.items() if o < result.clean_end_offset]
    assert len(below) == len(set(below)) or result.clean_end_offset == 0


# -- wiring ------------------------------------------------------------------------------------------


def test_the_log_manager_runs_the_cleaner_and_survives_a_topic_deleted_mid_cleaning(
        tmp_path: Path, clock: ManualClock) -> None:
    config = replace(LogConfig(), segment_bytes=300, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
    manager = LogManager([str(tmp_path / "logs")], clock, LogConfig())
    held = HeldExecutor()
    manager.cleaner = LogCleaner(clock, manager.logs, executor=held)
    for topic in ("kept", "doomed"):
        log = manager.create(topic, 0, None, config)
        for batch in updates(keys=2, rounds=8):
            append(log, batch)
    plain = manager.create("plain", 0, None, replace(config, cleanup_policy=("delete",)))
    for batch in updates(keys=2, rounds=8):
        append(plain, batch)
    deleted_mid_cleaning = False
    for _ in range(4):
        manager.run_cleaner(clock.time_ms())
        if held.jobs and held.jobs[0][2][0].directory.endswith("doomed-0"):
            manager.delete("doomed", 0)
            deleted_mid_cleaning = True
        held.run()
    manager.run_cleaner(clock.time_ms())
    assert deleted_mid_cleaning
    kept = manager.get("kept", 0)
    assert kept is not None and len(read_all(kept)) < 16
    assert len(read_all(plain)) == 16, "a delete-only topic is never compacted"
    assert not list((tmp_path / "logs").glob("doomed-0*"))
    manager.close()
    assert (tmp_path / "logs" / "kept-0" / CHECKPOINT_FILE).exists()
