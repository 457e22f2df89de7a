"""acks=all answered without waiting: `HostedPartition.acks_now` gives `wait_for_acks`'s answer when no wait is
needed (a single replica, leadership gone), and None whenever the records are not yet on every in-sync replica."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode
from moldau.replication.leader_state import LeaderState
from moldau.replication.replica_manager import HostedPartition, _AckWaiter
from moldau.storage.log import PartitionLog
from moldau.storage.log_config import LogConfig
from tests.unit.storage.batches import START_MS, batches_of, make_batch


@pytest.fixture
def plog(tmp_path: Path) -> Iterator[PartitionLog]:
    log = PartitionLog.open(str(tmp_path / "topic-0"), replace(LogConfig(), min_insync_replicas=2),
                            ManualClock(START_MS))
    log.append(batches_of(make_batch([b"a", b"b", b"c"])), 0)
    yield log
    log.close()


def _hosted(plog: PartitionLog, isr: tuple[int, ...] | None, replicas: tuple[int, ...] = (1, 2, 3)
            ) -> HostedPartition:
    hosted = HostedPartition("topic", 0, uuid.uuid4(), plog, leader=1, leader_epoch=0)
    if isr is not None:
        hosted.leader_state = LeaderState(node_id=1, replicas=replicas, isr=isr, leader_epoch=0, partition_epoch=0,
                                          epoch_start_offset=0, lag_max_ms=30_000, now_ms=0)
    return hosted


def test_records_below_the_high_watermark_are_answered_at_once(plog: PartitionLog) -> None:
    plog.high_watermark_follows_log_end = False
    plog.high_watermark = 3
    assert _hosted(plog, isr=(1, 2)).acks_now(3) == ErrorCode.none


def test_an_isr_smaller_than_min_insync_replicas_is_answered_at_once_with_its_error(plog: PartitionLog) -> None:
    assert _hosted(plog, isr=(1,), replicas=(1,)).acks_now(3) == ErrorCode.not_enough_replicas_after_append


def test_records_not_yet_on_every_in_sync_replica_wait(plog: PartitionLog) -> None:
    plog.high_watermark_follows_log_end = False
    plog.high_watermark = 1
    assert _hosted(plog, isr=(1, 2)).acks_now(3) is None


def test_waiters_already_queued_keep_their_order(plog: PartitionLog) -> None:
    plog.high_watermark_follows_log_end = False
    plog.high_watermark = 3
    hosted = _hosted(plog, isr=(1, 2))
    loop = asyncio.new_event_loop()
    try:
        hosted.ack_waiters.append(_AckWaiter(2, loop.create_future()))
        assert hosted.acks_now(3) is None
    finally:
        loop.close()


def test_a_partition_no_longer_led_here_is_answered_at_once(plog: PartitionLog) -> None:
    assert _hosted(plog, isr=None).acks_now(3) == ErrorCode.not_leader_or_follower
