"""A leader's ISR expansion stays pending until its outcome is known: the high watermark keeps counting on the
member being added through a controller that does not answer, and through an answer that says the change was
applied but moved leadership elsewhere (a reassignment completing). Only a refusal puts it back on the committed
ISR, at once. Before, any answer but a plain success dropped the proposal, and the leader acknowledged records that
the new leader did not have."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.metadata.records import PartitionRecord
from moldau.protocol.errors import ErrorCode
from moldau.replication import replica_manager
from moldau.replication.leader_state import EXPANSION_BACKOFF_MS
from moldau.replication.replica_manager import HostedPartition, IsrAnswer, IsrProposal, ReplicaManager
from tests.unit.replication.hosting import TOPIC, close, hosting
from tests.unit.storage.batches import batches_of, make_batch

LEADER, FOLLOWER = 1, 2
FOLLOWER_EPOCH = 77  # the follower's broker epoch, as its fetches name it


class ScriptedController:
    """Answers AlterPartition from a script: an answer, or an exception for a controller that cannot be reached."""

    def __init__(self, *answers: IsrAnswer | Exception) -> None:
        self.answers = list(answers)
        self.proposals: list[IsrProposal] = []
        self.asked = asyncio.Event()

    async def alter_isr(self, proposal: IsrProposal) -> IsrAnswer:
        self.proposals.append(proposal)
        self.asked.set()
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def replicas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ReplicaManager]:
    monkeypatch.setattr(replica_manager, "_ALTER_PARTITION_RETRY_MS", 1)
    manager = hosting(tmp_path, LEADER, (LEADER, FOLLOWER), lambda topic_id: [
        PartitionRecord(topic_id, 0, (LEADER, FOLLOWER), (LEADER,), LEADER, 3, 5)])
    yield manager
    close(manager)


def lead_with_a_caught_up_follower(replicas: ReplicaManager, controller: ScriptedController) -> HostedPartition:
    """Two records, on the follower too: it fetches at the log end and is proposed for the ISR."""
    replicas.alter_isr = controller.alter_isr
    hosted = replicas.partitions[(TOPIC, 0)]
    replicas.append_as_leader(hosted, batches_of(make_batch([b"a", b"b"])))
    replicas.on_replica_fetch(hosted, FOLLOWER, 2, FOLLOWER_EPOCH)
    assert hosted.leader_state is not None and hosted.leader_state.pending_isr == (LEADER, FOLLOWER)
    return hosted


async def settle(controller: ScriptedController, proposals: int) -> None:
    while len(controller.proposals) < proposals:
        controller.asked.clear()
        await asyncio.wait_for(controller.asked.wait(), 5)
    for _ in range(10):  # let the proposal task act on its answer
        await asyncio.sleep(0)


def more_records_not_on_the_follower(replicas: ReplicaManager, hosted: HostedPartition) -> None:
    replicas.append_as_leader(hosted, batches_of(make_batch([b"c"])))
    replicas.on_replica_fetch(hosted, FOLLOWER, 2, FOLLOWER_EPOCH)


def test_a_proposal_without_answer_is_sent_again_as_made_and_counts_meanwhile(replicas: ReplicaManager) -> None:
    async def scenario() -> None:
        controller = ScriptedController(ConnectionError("controller unreachable"),
                                IsrAnswer(ErrorCode.none, (LEADER, FOLLOWER), 3, 6))
        hosted = lead_with_a_caught_up_follower(replicas, controller)
        more_records_not_on_the_follower(replicas, hosted)
        await settle(controller, 1)
        assert hosted.log.high_watermark == 2, "the member being added still counts"
        await settle(controller, 2)
        first, again = controller.proposals
        assert again == first and first.member_epochs == (-1, FOLLOWER_EPOCH)
        state = hosted.leader_state
        assert state is not None and (state.isr, state.pending_isr, state.partition_epoch) == (
            (LEADER, FOLLOWER), None, 6)

    asyncio.run(scenario())


@pytest.mark.parametrize("answer", [
    IsrAnswer(ErrorCode.new_leader_elected),
    IsrAnswer(ErrorCode.none, (FOLLOWER,), 4, 6),  # applied in a change that also moved leadership
    IsrAnswer(ErrorCode.invalid_update_version),
], ids=["new_leader_elected", "success_in_a_new_leader_epoch", "invalid_update_version"])
def test_an_answer_that_leaves_it_to_the_metadata_keeps_the_proposal_pending(replicas: ReplicaManager,
                                                                           answer: IsrAnswer) -> None:
    async def scenario() -> None:
        controller = ScriptedController(answer)
        hosted = lead_with_a_caught_up_follower(replicas, controller)
        await settle(controller, 1)
        await asyncio.sleep(0.05)  # longer than the retry back-off, shortened here
        more_records_not_on_the_follower(replicas, hosted)
        state = hosted.leader_state
        assert state is not None and state.pending_isr == (LEADER, FOLLOWER)
        assert hosted.log.high_watermark == 2, "no acknowledgement for a record the new leader may lack"
        assert len(controller.proposals) == 1

    asyncio.run(scenario())


def test_a_refusal_puts_the_leader_back_on_the_committed_isr_at_once(replicas: ReplicaManager) -> None:
    """INELIGIBLE_REPLICA (the follower's broker is fenced or shutting down): the record waiting on the member that was
    to be added is acknowledged at once, not after a back-off; held pending instead, a broker that stopped during a
    controlled shutdown held every acks=all request of its partitions for the rest of it."""
    async def scenario() -> None:
        controller = ScriptedController(IsrAnswer(ErrorCode.ineligible_replica),
                                        IsrAnswer(ErrorCode.none, (LEADER, FOLLOWER), 3, 6))
        hosted = lead_with_a_caught_up_follower(replicas, controller)
        replicas.append_as_leader(hosted, batches_of(make_batch([b"c"])))
        assert hosted.log.high_watermark == 2, "the member being added counts while pending"
        await settle(controller, 1)
        state = hosted.leader_state
        assert state is not None and (state.isr, state.pending_isr) == ((LEADER,), None)
        assert hosted.log.high_watermark == 3, "the committed ISR is the leader alone"
        # Fetching on, caught up: not proposed again within the back-off, then proposed again.
        replicas.on_replica_fetch(hosted, FOLLOWER, 3, FOLLOWER_EPOCH)
        assert state.pending_isr is None and len(controller.proposals) == 1
        clock = replicas._clock
        assert isinstance(clock, ManualClock)
        clock.advance(EXPANSION_BACKOFF_MS)
        replicas.on_replica_fetch(hosted, FOLLOWER, 3, FOLLOWER_EPOCH)
        assert state.pending_isr == (LEADER, FOLLOWER)
        await settle(controller, 2)
        assert (state.isr, state.pending_isr) == ((LEADER, FOLLOWER), None)

    asyncio.run(scenario())
