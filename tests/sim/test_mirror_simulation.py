"""Offset translation never skips a record, over many seeded runs of a mirrored partition; and the
simulation catches a translation that runs ahead."""

from __future__ import annotations

import pytest

from moldau.mirror import offset_syncs
from moldau.mirror.offset_syncs import OffsetSyncStore
from tests.sim.mirror_simulation import InvariantViolation, MirrorSimulation

SEEDS = 300


def test_translation_never_skips_a_record() -> None:
    translations = 0
    for seed in range(SEEDS):
        sim = MirrorSimulation(seed)
        sim.run()
        translations += sim.translations
    assert translations > SEEDS * 20  # the invariant was checked on many real translations, not vacuously


def test_translation_never_skips_a_record_when_records_are_copied_in_runs() -> None:
    translations = 0
    for seed in range(SEEDS):
        sim = MirrorSimulation(seed, runs=True)
        sim.run()
        translations += sim.translations
    assert translations > SEEDS * 20


def _translate_from_newest(self: OffsetSyncStore, topic: str, partition: int, upstream_offset: int) -> int | None:
    """A translation that uses the newest sync whatever the group's offset."""
    slots = self._syncs.get((topic, partition))
    return None if slots is None or not self._caught_up else slots[0].downstream_offset + 1


def _translate_always_one_past(self: OffsetSyncStore, topic: str, partition: int, upstream_offset: int) -> int | None:
    """A translation that places a group one past the nearest sync even when it sits exactly on it."""
    slots = self._syncs.get((topic, partition))
    if slots is None or not self._caught_up:
        return None
    nearest = next((s for s in slots if s.upstream_offset <= upstream_offset), None)
    return None if nearest is None else nearest.downstream_offset + 1


@pytest.mark.parametrize("mutation", [_translate_from_newest, _translate_always_one_past])
def test_the_simulation_catches_a_translation_that_runs_ahead(mutation: object,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offset_syncs.OffsetSyncStore, "translate", mutation)
    with pytest.raises(InvariantViolation):
        for seed in range(SEEDS):
            MirrorSimulation(seed).run()
