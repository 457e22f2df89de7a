"""When offset syncs are written, and how offsets translate through them."""

from __future__ import annotations

from moldau.mirror.offset_syncs import OffsetSyncStore, OffsetSyncWriter
from moldau.mirror.records import OffsetSync


def test_syncs_are_written_first_on_gaps_and_when_translation_would_lag_too_far() -> None:
    writer = OffsetSyncWriter(offset_lag_max=3)
    assert writer.copied("t", 0, 10, 100) == OffsetSync("t", 0, 10, 100)  # the first record
    assert writer.copied("t", 0, 11, 101) is None
    assert writer.copied("t", 0, 12, 102) is None
    assert writer.copied("t", 0, 13, 103) is None
    assert writer.copied("t", 0, 14, 104) == OffsetSync("t", 0, 14, 104)  # 104 - (100 + 1) >= 3
    assert writer.copied("t", 0, 20, 105) == OffsetSync("t", 0, 20, 105)  # an upstream gap
    assert writer.copied("t", 0, 21, 106) is None
    assert writer.delayed() == [OffsetSync("t", 0, 21, 106)]  # the latest pair, at the periodic commit
    assert writer.delayed() == []


def test_a_run_of_records_is_judged_at_its_first_record_and_at_its_last() -> None:
    writer = OffsetSyncWriter(offset_lag_max=3)
    # The partition's first record gets its sync, however long the run; the rest are judged at the run's end.
    assert writer.copied_run("t", 0, 10, 100, 12, 102, 3) == [OffsetSync("t", 0, 10, 100)]
    assert writer.copied_run("t", 0, 13, 103, 14, 104, 2) == [OffsetSync("t", 0, 14, 104)]  # stale by its end
    assert writer.copied_run("t", 0, 15, 105, 16, 106, 2) == []
    assert writer.copied_run("t", 0, 20, 107, 21, 108, 2) == [OffsetSync("t", 0, 20, 107)]  # a gap before it
    assert writer.copied_run("t", 0, 22, 109, 30, 111, 3) == [OffsetSync("t", 0, 30, 111)]  # a gap inside it
    assert writer.copied_run("t", 0, 31, 111, 32, 112, 2) == [OffsetSync("t", 0, 31, 111)]  # the target went back
    assert writer.copied_run("t", 1, 0, 0, 0, 0, 1) == [OffsetSync("t", 1, 0, 0)]  # partitions are separate
    assert writer.copied_run("t", 0, 33, 113, 33, 113, 1) == []
    assert writer.delayed() == [OffsetSync("t", 0, 33, 113)]


def test_translation_waits_for_the_syncs_topic_to_be_read_to_its_end() -> None:
    store = OffsetSyncStore()
    store.add(OffsetSync("t", 0, 10, 100))
    assert store.translate("t", 0, 10) is None
    store.caught_up()
    assert store.translate("t", 0, 10) == 100  # exactly at a sync
    assert store.translate("t", 0, 15) == 101  # past it: one past, never further
    assert store.translate("t", 0, 5) is None  # before every sync kept: unknown
    assert store.translate("t", 1, 10) is None


def test_old_syncs_thin_out_but_the_newest_stay_exact() -> None:
    store = OffsetSyncStore()
    store.caught_up()
    for upstream in range(0, 10_000, 10):
        store.add(OffsetSync("t", 0, upstream, upstream + 5))
    assert store.translate("t", 0, 9_990) == 9_995  # the newest sync is always kept
    assert store.translate("t", 0, 9_995) == 9_996
    for upstream in (9_985, 5_000, 1_234):
        translated = store.translate("t", 0, upstream)
        assert translated is not None and translated <= upstream + 5  # coarser further back, never ahead
    assert len(store._syncs[("t", 0)]) <= 40


def test_a_sync_going_backwards_resets_the_partition() -> None:
    store = OffsetSyncStore()
    store.caught_up()
    store.add(OffsetSync("t", 0, 100, 1000))
    store.add(OffsetSync("t", 0, 50, 2000))  # the upstream partition was recreated
    assert store.translate("t", 0, 100) == 2001
    assert store.translate("t", 0, 49) is None


def test_a_group_behind_the_newest_sync_rereads_at_most_half_its_distance_more() -> None:
    for gap in (7, 10, 100):
        store = OffsetSyncStore()
        store.caught_up()
        for newest in range(0, 3000, gap):
            store.add(OffsetSync("t", 0, newest, newest))
            for group in range(0, newest + 1, 53):
                translated = store.translate("t", 0, group)
                assert translated is not None and translated <= group
                assert group - translated < gap + (newest - group) / 2, (gap, newest, group, translated)
