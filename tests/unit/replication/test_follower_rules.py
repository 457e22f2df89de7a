"""The follower's rules over a log described by hand: no file, no socket."""

from __future__ import annotations

from dataclasses import dataclass, field

from moldau.replication.follower_rules import (
    StartOverAt,
    TruncateTo,
    divergence_truncation,
    high_watermark_after_fetch,
    log_start_after_fetch,
    out_of_range_action,
)
from moldau.replication.leader_state import diverging_epoch
from moldau.storage.leader_epoch_cache import EpochEntry, LeaderEpochCache


class Epochs(LeaderEpochCache):
    def __init__(self, *entries: tuple[int, int]) -> None:
        super().__init__("memory", [EpochEntry(*e) for e in entries])

    def _replace(self, entries: list[EpochEntry], write: bool = True, durable: bool = True) -> None:
        self._entries = entries


@dataclass
class Log:
    log_end_offset: int
    epochs: Epochs = field(default_factory=Epochs)
    log_start_offset: int = 0
    high_watermark: int = 0

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.log_end_offset)


def test_divergence_cuts_at_the_end_of_the_last_shared_epoch_in_both_logs() -> None:
    # Follower: epoch 1 from 0, epoch 3 from 10 (it led briefly), log end 15. Leader: epoch 1 from 0, 4 from 12.
    follower = Log(15, Epochs((1, 0), (3, 10)))
    leader = Log(20, Epochs((1, 0), (4, 12)))
    assert diverging_epoch(leader, 3, 15) == (1, 12)
    assert divergence_truncation(follower, 1, 12) == TruncateTo(10)  # epoch 1 ends at 10 here, not 12


def test_divergence_cuts_at_the_leaders_end_when_that_is_shorter() -> None:
    follower = Log(15, Epochs((1, 0), (2, 5)))
    assert divergence_truncation(follower, 2, 8) == TruncateTo(8)


def test_an_epoch_older_than_all_the_followers_ends_where_its_first_epoch_starts() -> None:
    assert divergence_truncation(Log(15, Epochs((5, 3))), 2, 8) == TruncateTo(3)


def test_a_follower_without_epochs_cuts_to_the_leaders_end_or_keeps_a_shorter_log() -> None:
    assert divergence_truncation(Log(15), 2, 8) == TruncateTo(8)
    assert divergence_truncation(Log(6), 2, 8) == TruncateTo(6)


def test_no_divergence_when_the_followers_last_epoch_reaches_its_fetch_offset() -> None:
    leader = Log(20, Epochs((1, 0), (4, 12)))
    assert diverging_epoch(leader, 4, 20) is None
    assert diverging_epoch(leader, 1, 12) is None
    assert diverging_epoch(leader, -1, 30) is None  # an old follower that does not say its epoch


def test_out_of_range_restarts_below_the_leaders_start_and_cuts_past_its_high_watermark() -> None:
    assert out_of_range_action(Log(5), leader_start_offset=10, leader_high_watermark=12) == StartOverAt(10)
    assert out_of_range_action(Log(15), leader_start_offset=0, leader_high_watermark=12) == TruncateTo(12)
    assert out_of_range_action(Log(12), leader_start_offset=0, leader_high_watermark=12) is None


def test_high_watermark_and_log_start_follow_the_leader_within_this_log() -> None:
    log = Log(10, high_watermark=7, log_start_offset=2)
    assert high_watermark_after_fetch(log, 15) == 10
    assert high_watermark_after_fetch(log, 4) == 4
    assert log_start_after_fetch(log, 2) is None
    assert log_start_after_fetch(log, 5) == 5
    assert log_start_after_fetch(log, 9) == 7  # never past what this log has committed
