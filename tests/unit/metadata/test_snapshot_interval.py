"""metadata.log.max.snapshot.interval.ms: a node snapshots its metadata once that long has passed with records
the latest snapshot does not cover, however few bytes they are, and not again while nothing new comes."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from moldau.clock import ManualClock
from moldau.config import Voter
from moldau.metadata.quorum import MetadataQuorum
from moldau.metadata.records import TopicRecord
from moldau.raft import Config


def snapshots(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("snapshot-*.checkpoint"))


def test_a_snapshot_is_taken_when_the_interval_passed_with_records_not_covered(tmp_path: Path) -> None:
    clock = ManualClock()

    async def run() -> list[list[str]]:
        quorum = MetadataQuorum(1, [Voter(1, "127.0.0.1", 0)], "cluster", str(tmp_path), clock, Config(),
                                snapshot_every_bytes=1 << 30, snapshot_every_ms=60_000)
        quorum.open()
        quorum.start()
        seen = []
        try:
            await quorum.propose([TopicRecord("a", uuid.uuid4())])
            seen.append(snapshots(tmp_path))
            clock.advance(59_999)
            quorum._tick()
            seen.append(snapshots(tmp_path))
            clock.advance(1)
            quorum._tick()
            seen.append(snapshots(tmp_path))
            clock.advance(120_000)  # nothing new since: no second snapshot
            quorum._tick()
            seen.append(snapshots(tmp_path))
            await quorum.propose([TopicRecord("b", uuid.uuid4())])
            clock.advance(60_000)
            quorum._tick()
            seen.append(snapshots(tmp_path))
        finally:
            await quorum.stop()
        return seen

    first, before, due, idle, again = asyncio.run(run())
    assert first == before == [] and len(due) == 1 and idle == due
    assert len(again) >= 1 and again != due
