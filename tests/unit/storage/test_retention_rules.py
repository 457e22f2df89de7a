"""The retention and DeleteRecords rules, decided without files; and the offsets a log opens with."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.log_loading import loaded_offsets
from moldau.storage.retention import (
    RetainedSegment,
    beyond_retention_size,
    deletable_prefix,
    new_start_for_delete_records,
    past_retention_time,
    segments_below_start,
)


@dataclass(frozen=True)
class Seg:
    size_bytes: int
    retention_timestamp_ms: int = 0


def _always(_: RetainedSegment) -> bool:
    return True


# Three segments at 0, 10 and 20; the log ends at 30.
SEGS = [Seg(100), Seg(100), Seg(100)]
BASES = [0, 10, 20]


@pytest.mark.parametrize(("high_watermark", "count"), [(0, 0), (9, 0), (10, 1), (19, 1), (20, 2), (29, 2), (30, 3)])
def test_nothing_at_or_above_the_high_watermark_goes(high_watermark: int, count: int) -> None:
    assert deletable_prefix(SEGS, BASES, 30, high_watermark, _always) == count


def test_an_empty_active_segment_never_goes() -> None:
    assert deletable_prefix([Seg(100), Seg(0)], [0, 10], 10, 10, _always) == 1


def test_deletion_stops_at_the_first_segment_the_rule_keeps() -> None:
    segs = [Seg(100, 1_000), Seg(100, 9_000), Seg(100, 2_000)]
    assert deletable_prefix(segs, BASES, 30, 30, past_retention_time(10_000, 5_000)) == 1


def test_retention_by_time_is_strictly_older_than_retention_ms() -> None:
    rule = past_retention_time(10_000, 5_000)
    assert rule(Seg(1, 4_999)) and not rule(Seg(1, 5_000))


@pytest.mark.parametrize(("retention_bytes", "count"), [(300, 0), (201, 0), (200, 1), (150, 1), (100, 2), (0, 3)])
def test_retention_by_size_keeps_at_least_retention_bytes(retention_bytes: int, count: int) -> None:
    assert deletable_prefix(SEGS, BASES, 30, 30, beyond_retention_size(300, retention_bytes)) == count


def test_the_size_rule_counts_only_segments_it_was_asked_about() -> None:
    # Segments above the high watermark are never put to the rule, so they do not use up the excess.
    asked: list[RetainedSegment] = []
    size_rule = beyond_retention_size(300, 0)

    def rule(segment: RetainedSegment) -> bool:
        asked.append(segment)
        return size_rule(segment)

    assert deletable_prefix(SEGS, BASES, 30, 10, rule) == 1
    assert len(asked) == 1


@pytest.mark.parametrize(("log_start", "count"), [(0, 0), (9, 0), (10, 1), (19, 1), (20, 2), (30, 2)])
def test_segments_wholly_below_the_log_start(log_start: int, count: int) -> None:
    assert segments_below_start(BASES, log_start) == count


def test_delete_records_moves_the_log_start_forward_only() -> None:
    assert new_start_for_delete_records(15, 20, 10) == 15
    assert new_start_for_delete_records(-1, 20, 10) == 20  # -1: up to the high watermark
    assert new_start_for_delete_records(10, 20, 10) is None
    assert new_start_for_delete_records(5, 20, 10) is None


@pytest.mark.parametrize("offset", [21, -2])
def test_delete_records_beyond_the_high_watermark_is_refused(offset: int) -> None:
    with pytest.raises(KafkaError) as e:
        new_start_for_delete_records(offset, 20, 10)
    assert e.value.code == ErrorCode.offset_out_of_range


def test_loaded_offsets_without_checkpoints() -> None:
    assert loaded_offsets(5, 30, None, None) == (5, 30)


def test_loaded_offsets_stay_within_the_segments() -> None:
    assert loaded_offsets(5, 30, 12, 25) == (12, 25)
    assert loaded_offsets(5, 30, 2, 3) == (5, 5)  # below the first segment
    assert loaded_offsets(5, 30, 40, 50) == (30, 30)  # a crash lost what the checkpoints counted
    assert loaded_offsets(5, 30, 12, 8) == (12, 12)  # the high watermark never below the log start
