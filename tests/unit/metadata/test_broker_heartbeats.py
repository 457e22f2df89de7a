"""Heartbeat tracking (session expiry) and heartbeat decisions."""

from __future__ import annotations

from moldau.metadata.broker_heartbeats import BrokerHeartbeats, decide, fence
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import FenceBrokerRecord, MetadataRecord, UnfenceBrokerRecord
from moldau.protocol.errors import ErrorCode
from tests.unit.metadata.builders import build, part, partition, registration


def commit(image: MetadataImage, records: list[MetadataRecord]) -> MetadataImage:
    return image.apply(records, image.offset + len(records))


class TestTracker:
    def test_expiry_after_the_session_timeout(self) -> None:
        beats = BrokerHeartbeats(session_timeout_ms=1000)
        beats.touch(1, 0)
        beats.touch(2, 500)
        assert beats.expired(1000) == []
        assert beats.expired(1001) == [1]
        beats.touch(1, 1200)
        assert beats.expired(1600) == [2]

    def test_time_never_goes_backwards(self) -> None:
        beats = BrokerHeartbeats(1000)
        beats.touch(1, 5000)
        beats.touch(1, 10)
        assert beats.last_contact_ms(1) == 5000

    def test_only_live_brokers_expire_and_unknown_live_ones_get_a_session(self) -> None:
        beats = BrokerHeartbeats(1000)
        beats.touch(1, 0)
        beats.touch(2, 0)
        assert beats.expired(5000, live_brokers=[2, 3]) == [2]
        assert beats.last_contact_ms(3) == 5000
        assert beats.expired(6001, live_brokers=[3]) == [3]

    def test_forget(self) -> None:
        beats = BrokerHeartbeats(1000)
        beats.touch(1, 0)
        beats.forget(1)
        beats.forget(9)
        assert beats.expired(5000) == [] and beats.last_contact_ms(1) is None

    def test_reset_gives_a_new_controller_full_sessions(self) -> None:
        beats = BrokerHeartbeats(1000)
        beats.touch(1, 0)
        beats.touch(9, 0)
        beats.reset(10_000, [1, 2])
        assert beats.expired(11_000) == []
        assert beats.expired(11_001) == [1, 2]


class TestDecide:
    def test_unknown_broker_and_stale_epoch(self) -> None:
        image = build([registration(1, epoch=5)])
        for broker_id, epoch in ((2, 5), (1, 4)):
            decision = decide(image, broker_id, epoch, 100, want_fence=False, want_shutdown=False)
            assert decision.error == ErrorCode.stale_broker_epoch and decision.records == []

    def test_fenced_broker_is_unfenced_once_caught_up(self) -> None:
        image = build([registration(1, epoch=5, fenced=True), registration(2)],
                      [partition(0, [1, 2], isr=[1], leader=-1)])
        behind = decide(image, 1, 5, 4, want_fence=False, want_shutdown=False)
        assert behind.error is None and behind.is_fenced and not behind.is_caught_up and behind.records == []

        decision = decide(image, 1, 5, 5, want_fence=False, want_shutdown=False)
        assert decision.is_caught_up and not decision.is_fenced and not decision.should_shut_down
        assert decision.records[0] == UnfenceBrokerRecord(1, 5)
        image = commit(image, decision.records)
        assert image.is_live(1) and part(image, 0).leader == 1

        steady = decide(image, 1, 5, 50, want_fence=False, want_shutdown=False)
        assert steady.records == [] and not steady.is_fenced

    def test_want_fence(self) -> None:
        image = build([registration(1, epoch=5), registration(2)], [partition(0, [1, 2])])
        decision = decide(image, 1, 5, 50, want_fence=True, want_shutdown=False)
        assert decision.is_fenced and decision.records[0] == FenceBrokerRecord(1, 5)
        image = commit(image, decision.records)
        assert not image.is_live(1) and part(image, 0).leader == 2
        again = decide(image, 1, 5, 50, want_fence=True, want_shutdown=False)
        assert again.is_fenced and again.records == []  # a broker that wants to be fenced is not unfenced

    def test_controlled_shutdown_moves_leadership_then_lets_the_broker_go(self) -> None:
        image = build([registration(1, epoch=5), registration(2)],
                      [partition(0, [1, 2]), partition(1, [1], leader=1)])
        first = decide(image, 1, 5, 50, want_fence=False, want_shutdown=True)
        assert first.is_fenced and not first.should_shut_down
        assert first.records[0] == FenceBrokerRecord(1, 5)
        image = commit(image, first.records)
        assert part(image, 0).leader == 2 and part(image, 1).leader == -1

        second = decide(image, 1, 5, 60, want_fence=False, want_shutdown=True)
        assert second.should_shut_down and second.records == []

    def test_session_expiry_fence(self) -> None:
        image = build([registration(1, epoch=5), registration(2, fenced=True)], [partition(0, [1, 2], isr=[1, 2])])
        records = fence(image, 1)
        assert records[0] == FenceBrokerRecord(1, 5)
        assert part(commit(image, records), 0).leader == -1  # broker 2 is fenced too: no live ISR member
        assert fence(image, 2) == [] and fence(image, 9) == []

    def test_a_broker_back_from_a_clean_stop_keeps_what_nobody_else_could_lead(self) -> None:
        # Partition 0: broker 1 alone; 1: broker 2 in the ISR can take over; 2: broker 1 last in the ISR, 2 fenced.
        image = build([registration(1, epoch=5), registration(2), registration(3, fenced=True)],
                      [partition(0, [1], leader=1), partition(1, [1, 2], isr=[1, 2], leader=1),
                       partition(2, [1, 3], isr=[1], leader=1)])
        records = fence(image, 1, stopped_cleanly=True)
        assert records[0] == FenceBrokerRecord(1, 5)
        image = commit(image, records)
        assert (part(image, 0).leader, part(image, 0).leader_epoch) == (1, 0)  # no record: same leader and epoch
        assert (part(image, 2).leader, part(image, 2).leader_epoch) == (1, 0)
        assert part(image, 1).leader == 2 and part(image, 1).isr == (2,)  # another broker could: it does
        unfence = decide(image, 1, 5, 50, want_fence=False, want_shutdown=False)
        assert unfence.records == [UnfenceBrokerRecord(1, 5)]  # back in one record: nothing to elect

    def test_after_an_unclean_stop_every_leadership_goes_and_comes_back_at_a_new_epoch(self) -> None:
        image = build([registration(1, epoch=5)], [partition(0, [1], leader=1)])
        image = commit(image, fence(image, 1))
        assert part(image, 0).leader == -1
        image = commit(image, decide(image, 1, 5, 50, want_fence=False, want_shutdown=False).records)
        assert (part(image, 0).leader, part(image, 0).leader_epoch) == (1, 2)
