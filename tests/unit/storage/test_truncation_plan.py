"""`plan_truncation`: where a truncation cuts the log, decided without files."""

from __future__ import annotations

import pytest

from moldau.storage.truncation import Truncation, TruncationKind, plan_truncation

# Three segments at 0, 10 and 20; the log holds offsets 0..29.
BASES = [0, 10, 20]


@pytest.mark.parametrize("offset", [30, 31, 1000])
def test_at_or_past_the_log_end_no_record_goes(offset: int) -> None:
    assert plan_truncation(offset, 0, 30, BASES) == Truncation(TruncationKind.KEEP_RECORDS)


@pytest.mark.parametrize(("offset", "kept"), [(5, 1), (10, 1), (11, 2), (20, 2), (29, 3)])
def test_segments_from_the_offset_on_go_and_the_one_holding_it_is_cut(offset: int, kept: int) -> None:
    # A segment starting exactly at the offset goes whole, so the one before it is the last kept.
    assert plan_truncation(offset, 0, 30, BASES) == Truncation(TruncationKind.CUT, kept)


def test_at_the_first_base_offset_the_log_starts_over() -> None:
    assert plan_truncation(0, 0, 30, BASES).kind is TruncationKind.START_OVER
    assert plan_truncation(10, 5, 30, [10, 20]).kind is TruncationKind.START_OVER


def test_below_the_log_start_the_log_starts_over() -> None:
    # The log start lies inside the first segment: cutting below it would leave offsets clients may not read.
    assert plan_truncation(12, 15, 30, BASES).kind is TruncationKind.START_OVER
    assert plan_truncation(15, 15, 30, BASES) == Truncation(TruncationKind.CUT, 2)


def test_a_log_of_one_segment() -> None:
    assert plan_truncation(3, 0, 8, [0]) == Truncation(TruncationKind.CUT, 1)
    assert plan_truncation(8, 0, 8, [0]).kind is TruncationKind.KEEP_RECORDS


def test_a_negative_offset_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        plan_truncation(-1, 0, 30, BASES)
