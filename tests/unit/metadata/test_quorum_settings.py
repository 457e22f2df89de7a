"""Settings of the metadata quorum's driver: metadata.log.max.snapshot.interval.ms (a node snapshots its metadata
once that long has passed with records the latest snapshot does not cover, however few bytes they are, and not
again while nothing new comes), controller.quorum.request.timeout.ms and the failures that
controller.quorum.retry.backoff.ms acts on."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.config import Voter
from moldau.metadata import raft_wire as wire
from moldau.metadata.quorum import MetadataQuorum
from moldau.metadata.records import TopicRecord
from moldau.raft import BeginEpoch, Config, VoteRequest


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


def test_a_request_to_a_member_that_never_answers_fails_after_the_request_timeout(tmp_path: Path) -> None:
    """controller.quorum.request.timeout.ms: the quorum's requests give up on a silent peer after it."""

    async def run() -> float:
        silent = await asyncio.start_server(lambda reader, writer: None, "127.0.0.1", 0)  # takes, never answers
        port = silent.sockets[0].getsockname()[1]
        quorum = MetadataQuorum(1, [Voter(1, "127.0.0.1", 0)], "cluster", str(tmp_path), ManualClock(), Config(),
                                snapshot_every_bytes=1 << 20, request_timeout_ms=300)
        request = wire.encode_vote_request(VoteRequest(1, 2, 1, 0, 0, True), "cluster")
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            await quorum._call("127.0.0.1", port, request)
        except TimeoutError:
            return loop.time() - started
        finally:
            silent.close()
        raise AssertionError("a silent member answered")

    waited = asyncio.run(run())
    assert 0.3 <= waited < 1.9  # the configured timeout, not the 2 s default


def test_a_request_without_a_usable_answer_is_reported_to_the_core(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """controller.quorum.retry.backoff.ms: the core hears of every failed request, so that it backs off from the
    member. A dropped connection, no address, or an error answer to a request whose answer the core reads fail;
    BeginQuorumEpoch and EndQuorumEpoch answers are not read, so only their transport can fail."""

    async def run() -> list[str]:
        hangs_up = await asyncio.start_server(lambda reader, writer: writer.close(), "127.0.0.1", 0)
        port = hangs_up.sockets[0].getsockname()[1]
        quorum = MetadataQuorum(1, [Voter(1, "127.0.0.1", 0), Voter(2, "127.0.0.1", port)], "cluster",
                                str(tmp_path), ManualClock(), Config(), snapshot_every_bytes=1 << 20)
        quorum.open()
        failed: list[str] = []
        monkeypatch.setattr(quorum.node, "on_request_failed",
                            lambda msg, now_ms: failed.append(f"{type(msg).__name__} to {msg.dst}"))
        try:
            await quorum._request(VoteRequest(1, 2, 1, 0, 0, True))  # the member hangs up
            await quorum._request(VoteRequest(1, 3, 1, 0, 0, True))  # no address for node 3

            async def error_answer(msg: object, address: Voter) -> None:
                return None

            monkeypatch.setattr(quorum, "_exchange", error_answer)
            await quorum._request(VoteRequest(1, 2, 1, 0, 0, True))
            await quorum._request(BeginEpoch(1, 2, 1))  # answered (not read): no failure
        finally:
            await quorum.stop(resign=False)
            hangs_up.close()
        return failed

    assert asyncio.run(run()) == ["VoteRequest to 2", "VoteRequest to 3", "VoteRequest to 2"]
