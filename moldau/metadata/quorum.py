"""The metadata quorum of one node: the Raft core driven by asyncio, disk and the network.

`RaftNode` (moldau.raft) decides; this class performs. It feeds the core with ticks, with requests that arrive
on the controller listener and with the answers to requests it sent, and carries out the core's actions in the
order given: term/vote and log changes go to the `QuorumStore`, and the log is fsynced before any message that
could report it leaves (the core's contract). Entries below the high watermark are committed: they are applied,
in order, to the metadata image, and the listeners are told.

A single node is a quorum of one voter: proposals commit as soon as they are on disk, all in the same call, so a
lone broker behaves exactly as before there was a quorum. A broker that is not a voter is an observer: it fetches
the log from the leader and applies it, but never votes.

Voters are static (`controller.quorum.voters`, `kraft.version` 0) until the leader writes the first VotersRecord
(`kraft.version` 1, KIP-853); from then on the log's newest VotersRecord is the voter set, and `add_voter`,
`remove_voter` and `update_voter` change it one voter at a time. `voters` is the address book: every controller
this node knows how to reach (configured, discovered from bootstrap servers, or named in a VotersRecord).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from moldau.clock import Clock
from moldau.config import Voter
from moldau.metadata import raft_wire as wire
from moldau.metadata.image import MetadataImage
from moldau.metadata.quorum_store import QuorumStore, decode_records, encode_records
from moldau.metadata.records import MetadataRecord
from moldau.metrics.counters import WindowedStat
from moldau.net.client import Authenticator, ConnectionFailed, ConnectionPool
from moldau.net.timeouts import ConnectionSetup
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.raft import (
    Append,
    BeginEpoch,
    Config,
    EndEpoch,
    Endpoint,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    InstallSnapshot,
    Message,
    RaftNode,
    ReplicaState,
    Role,
    SaveSnapshot,
    Send,
    SetTermVote,
    Snapshot,
    Truncate,
    VoterChangeError,
    VoterChangeRefused,
    VoteRequest,
    VoteResponse,
    VoterInfo,
    VotersRecord,
)
from moldau.security.client_security import PLAINTEXT, ClientSecurity

log = logging.getLogger(__name__)

TICK_INTERVAL_S = 0.01
STORAGE_RETRY_MS = 1000
DEFAULT_REQUEST_TIMEOUT_MS = 2000  # Kafka's controller.quorum.request.timeout.ms
VOTER_CHANGE_RETRY_S = 0.05
UPDATE_VOTER_INTERVAL_MS = 2000
UPDATE_VOTER_TIMEOUT_S = 10.0

# How a refused voter change is answered (Kafka's error codes for AddRaftVoter/RemoveRaftVoter/UpdateRaftVoter).
_REFUSALS = {
    VoterChangeError.NOT_LEADER: ErrorCode.not_leader_or_follower,
    VoterChangeError.STATIC_QUORUM: ErrorCode.unsupported_version,
    VoterChangeError.CHANGE_PENDING: ErrorCode.request_timed_out,
    VoterChangeError.NOT_CAUGHT_UP: ErrorCode.request_timed_out,
    VoterChangeError.DUPLICATE_VOTER: ErrorCode.duplicate_voter,
    VoterChangeError.VOTER_NOT_FOUND: ErrorCode.voter_not_found,
    VoterChangeError.INVALID: ErrorCode.invalid_request,
}
_RETRIED = (VoterChangeError.CHANGE_PENDING, VoterChangeError.NOT_CAUGHT_UP)  # they may clear before the timeout
# The requests whose answer the core reads: no usable answer to one of them is a failure. (BeginQuorumEpoch and
# EndQuorumEpoch fail only when no answer comes at all.)
_ANSWERED = (VoteRequest, FetchRequest, FetchSnapshotRequest)

ImageListener = Callable[[MetadataImage, MetadataImage], None]


class MetadataQuorum:
    def __init__(self, node_id: int, voters: Sequence[Voter], cluster_id: str, directory: str,
                 clock: Clock, raft_config: Config, snapshot_every_bytes: int,
                 rng: random.Random | None = None, security: ClientSecurity = PLAINTEXT,
                 authenticator: Authenticator | None = None, listener_name: str = "CONTROLLER",
                 snapshot_every_ms: int = 0, request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
                 connection_setup: ConnectionSetup | None = None) -> None:
        """A snapshot is taken when `snapshot_every_bytes` of entries were appended since the last one
        (metadata.log.max.record.bytes.between.snapshots), or when `snapshot_every_ms` passed since it and the
        log has entries it does not cover (metadata.log.max.snapshot.interval.ms; 0: never by time). A request to
        another member that has no answer within `request_timeout_ms` fails (controller.quorum.request.timeout.ms);
        opening a connection to one is bounded by `connection_setup` (socket.connection.setup.timeout.ms)."""
        self.node_id = node_id
        self.voters = {v.node_id: v for v in voters}  # the address book (see the module docstring)
        self._configured = frozenset(self.voters)
        self.listener_name = listener_name
        self.cluster_id = cluster_id
        self.clock = clock
        self._config = raft_config
        self._snapshot_every_bytes = snapshot_every_bytes
        self._snapshot_every_ms = snapshot_every_ms
        self._request_timeout_s = request_timeout_ms / 1000
        self._last_snapshot_ms = clock.monotonic_ms()
        self._rng = rng or random.Random()
        self._store = QuorumStore(directory)
        self._pool = ConnectionPool(f"moldau-quorum-{node_id}", security, authenticator, connection_setup)
        # UpdateRaftVoter waits for its record to commit, and a connection answers in order: on the fetch
        # connection it would hold back the very fetches that commit it (and the leader would step down).
        self._update_pool = ConnectionPool(f"moldau-quorum-update-{node_id}", security, authenticator,
                                           connection_setup)
        self.image = MetadataImage()
        self.applied_offset = 0  # entries below this are applied to the image
        self._bytes_since_snapshot = 0
        self._listeners: list[ImageListener] = []
        self._leader_listeners: list[Callable[[], None]] = []
        self._pending: dict[int, asyncio.Future[int]] = {}  # offset after a proposal -> applied
        self.commit_latency = WindowedStat()  # ms from a proposal appended here (the leader) to it committed
        self._epoch_start: int | None = None  # leader: offset of our leader-change entry
        self._replies: list[Message] | None = None  # collects answers while an inbound request is handled
        self._tasks: set[asyncio.Task[None]] = set()
        self._tick_task: asyncio.Task[None] | None = None
        self._applied_event = asyncio.Event()
        # For `wait_until_caught_up`: fetches are numbered as sent; the newest answered one and its HW.
        self._fetches_sent = 0
        self._answered_fetch = -1
        self._last_leader_hw = 0
        self._resume_after_ms = 0
        self._last_role: tuple[Role, int, int | None] | None = None
        self._known_voters: frozenset[int] = self._configured
        self.directory_id: uuid.UUID | None = None
        # This node's controller endpoints, set once its listeners are bound; a voter whose VotersRecord entry
        # says otherwise (or lacks its directory id) tells the leader with UpdateRaftVoter.
        self.own_endpoints: tuple[Endpoint, ...] = ()
        self._next_voter_update_ms = 0
        self.node: RaftNode

    # -- lifecycle -------------------------------------------------------------------------------------------

    def open(self, initial_records: Sequence[MetadataRecord] = ()) -> None:
        """Load the durable state; `initial_records` seed a brand-new log (a migrated single-node log)."""
        state = self._store.load()
        if state.snapshot is None and not state.entries and state.term == 0 and initial_records:
            snapshot = Snapshot(len(initial_records), 0, encode_records(initial_records))
            self._store.install_snapshot(snapshot)
            state.snapshot = snapshot
        if state.snapshot is not None:
            self._install_image(state.snapshot)
        self.directory_id = self._store.directory_id()
        self.node = RaftNode(self.node_id, self._configured, state, self._rng, self._now(), self._config)
        self._learn_addresses()

    def start(self) -> None:
        self._tick()  # a single voter elects itself at once
        self._tick_task = asyncio.get_running_loop().create_task(self._tick_loop())

    async def stop(self, resign: bool = True) -> None:
        if resign and self.node.role is Role.LEADER and len(self.node.voters) > 1:
            self.node.resign(self._now())
            self._run_actions()
            await asyncio.sleep(0.05)  # give the EndQuorumEpoch requests a moment to leave
        if self._tick_task is not None:
            self._tick_task.cancel()
        for task in list(self._tasks):
            task.cancel()
        self._fail_pending("the node is shutting down")
        self._pool.close()
        self._update_pool.close()
        self._store.close()

    def add_listener(self, listener: ImageListener) -> None:
        self._listeners.append(listener)

    def add_leadership_listener(self, listener: Callable[[], None]) -> None:
        """Called whenever this node's role or term changes."""
        self._leader_listeners.append(listener)

    # -- state ---------------------------------------------------------------------------------------------------

    @property
    def leader_id(self) -> int | None:
        return self.node.leader_id

    @property
    def epoch(self) -> int:
        return self.node.term

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.node.voters

    @property
    def dynamic(self) -> bool:
        """True once the voter set is in the log (`kraft.version` 1)."""
        return self.node.history.dynamic

    def voter_record(self) -> VotersRecord:
        """The voter set in effect, with directory ids and endpoints where known."""
        record = self.node.voter_record
        if self.dynamic:
            return record
        return VotersRecord(tuple(self._describe(i) for i in sorted(record.ids)))

    def _describe(self, node_id: int) -> VoterInfo:
        """A configured voter as a VotersRecord describes it (only our own directory id is known here)."""
        address = self.voters.get(node_id)
        endpoints = () if address is None or address.port <= 0 else (
            Endpoint(self.listener_name, address.host, address.port),)
        return VoterInfo(node_id, self.directory_id if node_id == self.node_id else None, endpoints)

    def _learn_addresses(self) -> None:
        """Add the endpoints the voter records name (on the controller listener) to the address book."""
        for _, record in self.node.history.records():
            for voter in record.voters:
                endpoint = next((e for e in voter.endpoints if e.name == self.listener_name), None)
                if endpoint is not None:
                    self.voters[voter.node_id] = Voter(voter.node_id, endpoint.host, endpoint.port)
        snapshot = self.node.latest_snapshot
        if snapshot is not None and snapshot.voters is not None:
            for voter in snapshot.voters.voters:
                endpoint = next((e for e in voter.endpoints if e.name == self.listener_name), None)
                if endpoint is not None and voter.node_id not in self.voters:
                    self.voters[voter.node_id] = Voter(voter.node_id, endpoint.host, endpoint.port)

    def is_active_controller(self) -> bool:
        """Leader, with every entry of earlier epochs applied: its image is the whole committed truth."""
        return (self.node.role is Role.LEADER and self._epoch_start is not None
                and self.applied_offset > self._epoch_start)

    def _address(self, node_id: int | None) -> Voter | None:
        """Where `node_id` listens for the quorum, if known: given in our answers that name it as leader."""
        if node_id is None:
            return None
        if node_id == self.node_id:
            own = next((e for e in self.own_endpoints if e.name == self.listener_name), None)
            if own is not None:
                return Voter(node_id, own.host, own.port)
        return self.voters.get(node_id)

    def _learn_from_answer(self, response: Any, leader: int | None) -> None:
        """Add the address a Vote or Fetch answer gives for the leader it names to the address book, where it has
        none: a voter whose set lacks the leader learns where to reach it (`RaftNode._probe`). Only that leader's,
        so an answer cannot fill the book; a known address is kept, as the voter records are the authority on it."""
        if leader is None or leader == self.node_id or leader in self.voters:
            return
        address = next((a for a in wire.node_endpoints(response) if a.node_id == leader), None)
        if address is not None:
            self.voters[leader] = address

    def leader_address(self) -> Voter | None:
        leader = self.node.leader_id
        return None if leader is None else self.voters.get(leader)

    @property
    def high_watermark(self) -> int:
        return self.node.high_watermark

    def next_offset(self) -> int:
        """The offset the next proposal will get (on the leader, under the controller's lock)."""
        return self.node.log.end_offset

    def clock_ms(self) -> int:
        return self._now()

    def replica_states(self) -> list[ReplicaState]:
        return self.node.replica_states(self._now())

    # -- proposals -------------------------------------------------------------------------------------------

    async def propose(self, records: Sequence[MetadataRecord]) -> int:
        """Append `records` as one atomic entry and wait until applied here; returns the entry's offset.

        Raises KafkaError(NOT_CONTROLLER) when this node is not the active controller or loses leadership before
        the entry commits, and KAFKA_STORAGE_ERROR when the log cannot be written.
        """
        if not self.is_active_controller():
            raise KafkaError(ErrorCode.not_controller, "this node is not the active controller")
        proposed_ms = self._now()
        result = self.node.propose([tuple(records)], proposed_ms)
        if not isinstance(result, int):
            raise KafkaError(ErrorCode.not_controller, "this node is not the active controller")
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending[result + 1] = future
        try:
            self._run_actions()
        except OSError as exc:
            if future.done():
                future.exception()  # failed by the reload; the caller gets the storage error instead
            raise KafkaError(ErrorCode.kafka_storage_error, f"cannot write the metadata log: {exc}") from exc
        offset = await future
        now = self._now()
        self.commit_latency.record(now - proposed_ms, now)
        return offset

    def _resolve_pending(self) -> None:
        for end in sorted(o for o in self._pending if o <= self.applied_offset):
            future = self._pending.pop(end)
            if not future.done():
                future.set_result(end - 1)

    def _fail_pending(self, why: str) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(KafkaError(ErrorCode.not_controller, why))

    # -- voter changes (KIP-853) -------------------------------------------------------------------------------

    async def enable_dynamic_voters(self, timeout_s: float) -> None:
        """Write the first VotersRecord (the configured voters): `kraft.version` 0 -> 1. A no-op once dynamic."""
        if self.dynamic:
            return
        record = VotersRecord(tuple(self._describe(i) for i in sorted(self.node.voters)))
        await self._change_voters(lambda now: self.node.enable_dynamic_voters(record, now), timeout_s, True)

    async def add_voter(self, voter: VoterInfo, timeout_s: float, ack_when_committed: bool = True) -> None:
        """Add a caught-up observer as a voter (AddRaftVoter). Raises KafkaError with Kafka's error code."""
        await self._change_voters(lambda now: self.node.add_voter(voter, now), timeout_s, ack_when_committed)

    async def remove_voter(self, node_id: int, directory_id: uuid.UUID | None, timeout_s: float) -> None:
        """Remove a voter (RemoveRaftVoter); `directory_id` must match the recorded one where that is known."""
        known = self.node.voter_record.get(node_id)
        if known is not None and None not in (known.directory_id, directory_id) and known.directory_id != directory_id:
            raise KafkaError(ErrorCode.voter_not_found,
                             f"voter {node_id} has directory id {known.directory_id}, not {directory_id}")
        await self._change_voters(lambda now: self.node.remove_voter(node_id, now), timeout_s, True)

    async def update_voter(self, voter: VoterInfo, timeout_s: float) -> None:
        """Record a voter's new endpoints (UpdateRaftVoter); a no-op when nothing changed."""
        known = self.node.voter_record.get(voter.node_id)
        if known == voter:
            return
        if known is not None and known.directory_id not in (None, voter.directory_id):
            raise KafkaError(ErrorCode.voter_not_found, f"voter {voter.node_id} has directory id {known.directory_id}")
        await self._change_voters(lambda now: self.node.update_voter(voter, now), timeout_s, True)

    async def _change_voters(self, change: Callable[[int], int | VoterChangeRefused], timeout_s: float,
                             wait_for_commit: bool) -> None:
        """Ask the core for a change until it accepts, refuses for good, or `timeout_s` passes; then wait for
        the record to commit (and be applied here) if asked."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            result = change(self._now())
            self._run_actions()
            if not isinstance(result, VoterChangeRefused):
                log.info("metadata quorum: voter change appended at offset %d", result)
                break
            if result.error not in _RETRIED or loop.time() >= deadline:
                log.info("metadata quorum: voter change refused: %s", result.message)
                raise KafkaError(_REFUSALS[result.error], result.message)
            await asyncio.sleep(VOTER_CHANGE_RETRY_S)
        if not wait_for_commit:
            return
        future: asyncio.Future[int] = loop.create_future()
        self._pending[result + 1] = future
        self._resolve_pending()
        try:
            await asyncio.wait_for(future, max(deadline - loop.time(), 0.1))
        except TimeoutError as exc:
            raise KafkaError(ErrorCode.request_timed_out, "the voter change did not commit in time") from exc
        except KafkaError as exc:
            raise KafkaError(ErrorCode.not_leader_or_follower, exc.message) from exc

    async def wait_for_image(self, condition: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        """Wait until the applied image satisfies `condition`; False if it did not within `timeout_s`."""
        return await self._wait_applied(lambda: condition(self.image), timeout_s)

    async def wait_until_caught_up(self, timeout_s: float) -> bool:
        """Wait until this node applied everything the leader had committed when the call was made.

        A broker that forwarded a change to the controller calls this before answering, so that the client's next
        request to this broker sees the change (read your writes).
        """
        if self.node.role is Role.LEADER:
            return True
        # Only the answer to a fetch sent after this call is sure to carry the leader's high watermark of now.
        first_fetch = self._fetches_sent
        return await self._wait_applied(
            lambda: self._answered_fetch >= first_fetch and self.applied_offset >= self._last_leader_hw, timeout_s)

    async def _wait_applied(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `condition` holds, checking it whenever entries are applied or a fetch is answered; False if
        it did not within `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not condition():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            self._applied_event.clear()
            try:
                await asyncio.wait_for(self._applied_event.wait(), remaining)
            except TimeoutError:
                return condition()
        return True

    # -- driving the core ------------------------------------------------------------------------------------

    def _now(self) -> int:
        return int(self.clock.monotonic_ms())

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL_S)
            try:
                self._tick()
            except OSError:
                pass  # logged, and paused, by _run_actions
            except Exception:
                log.exception("metadata quorum tick failed")

    def _tick(self) -> None:
        if self._now() < self._resume_after_ms:
            return
        self.node.tick(self._now())
        self._run_actions()
        self._maybe_snapshot()  # by time: records may have come long before, none since
        self._maybe_update_own_voter()

    # -- UpdateRaftVoter: keeping our own entry in the voter set true ---------------------------------------

    def _own_voter(self) -> VoterInfo | None:
        """This node as its VotersRecord entry should describe it; None when that entry is right (or absent)."""
        recorded = self.node.voter_record.get(self.node_id)
        if not self.dynamic or recorded is None or not self.own_endpoints:
            return None
        mine = VoterInfo(self.node_id, self.directory_id, self.own_endpoints)
        if recorded.directory_id == mine.directory_id and set(recorded.endpoints) == set(mine.endpoints):
            return None
        return mine

    def _maybe_update_own_voter(self) -> None:
        now = self._now()
        if now < self._next_voter_update_ms or self.node.leader_id is None:
            return
        mine = self._own_voter()
        if mine is None:
            return
        self._next_voter_update_ms = now + UPDATE_VOTER_INTERVAL_MS
        task = asyncio.get_running_loop().create_task(self._update_own_voter(mine))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _update_own_voter(self, mine: VoterInfo) -> None:
        try:
            if self.node.role is Role.LEADER:
                await self.update_voter(mine, self._request_timeout_s)
                return
            address = self.leader_address()
            if address is None:
                return
            request = wire.update_voter_request(mine, self.cluster_id, self.node.term)
            answer = await self._update_pool.request(address.host, address.port, request, UPDATE_VOTER_TIMEOUT_S)
            if answer.error_code != ErrorCode.none:
                log.info("metadata quorum: UpdateRaftVoter refused: %s", ErrorCode(answer.error_code).name)
        except (KafkaError, ConnectionFailed, TimeoutError) as exc:
            log.debug("metadata quorum: UpdateRaftVoter failed: %s", exc)

    def deliver(self, msg: Message) -> list[Message]:
        """Handle an inbound request; returns the core's answers addressed to its sender."""
        self._replies = []
        try:
            self.node.on_message(msg, self._now())
            self._run_actions(reply_to=msg.src)
            return self._replies
        finally:
            self._replies = None

    def _run_actions(self, reply_to: int | None = None) -> None:
        """Perform the core's actions; if the disk refuses one, start over from what is durable and re-raise.

        The core has already changed its memory when it asks for an action. If the write fails (a full disk),
        memory is ahead of disk, and a one-voter quorum would even treat the unwritten entry as committed. So
        the core is rebuilt from the durable state: unwritten entries are forgotten, waiting proposals fail,
        and the node rejoins (or re-elects itself) as after a restart.
        """
        try:
            self._perform_actions(reply_to)
        except OSError as exc:
            log.error("metadata quorum: cannot write the metadata log (%s); reloading it from disk and pausing "
                      "for %d ms", exc, STORAGE_RETRY_MS)
            self._reload_from_disk()
            self._resume_after_ms = self._now() + STORAGE_RETRY_MS  # a full disk: do not retry in a busy loop
            raise

    def _reload_from_disk(self) -> None:
        with contextlib.suppress(OSError):
            self._store.close()
        self._store = QuorumStore(self._store.directory)
        state = self._store.load()
        self.node = RaftNode(self.node_id, self._configured, state, self._rng, self._now(), self._config)
        self._epoch_start = None
        self._last_role = None
        self._fail_pending("the metadata log could not be written")

    def _perform_actions(self, reply_to: int | None) -> None:
        for action in self.node.drain():
            match action:
                case SetTermVote():
                    self._store.set_term_vote(action.term, action.voted_for)
                case Append():
                    self._bytes_since_snapshot += self._store.append(action.offset, action.entries)
                case Truncate():
                    self._store.truncate(action.offset)
                case SaveSnapshot():
                    self._store.save_snapshot(action.snapshot, self._entries_from(action.snapshot.end_offset))
                case InstallSnapshot():
                    log.info("metadata quorum: installing a metadata snapshot up to offset %d from the leader",
                             action.snapshot.end_offset)
                    self._store.install_snapshot(action.snapshot)
                    self._install_image(action.snapshot)
                case Send():
                    self._store.sync()
                    self._send(action.message, reply_to)
        self._store.sync()
        self._after_actions()

    def _entries_from(self, offset: int) -> list[Any]:
        end = self.node.log.end_offset
        return list(self.node.log.read(offset, end - offset)) if end > offset else []

    def _send(self, msg: Message, reply_to: int | None) -> None:
        is_reply = isinstance(msg, VoteResponse | FetchResponse | FetchSnapshotResponse)
        if is_reply:
            if self._replies is not None and msg.dst == reply_to:
                self._replies.append(msg)
            return  # an answer with no request waiting for it (the core never sends these unprompted)
        task = asyncio.get_running_loop().create_task(self._request(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _after_actions(self) -> None:
        if self.node.voters != self._known_voters:
            self._known_voters = self.node.voters
            self._learn_addresses()
            log.info("metadata quorum: the voters are now %s", sorted(self.node.voters))
        role = (self.node.role, self.node.term, self.node.leader_id)
        if role != self._last_role:
            self._on_role_change(role)
        self._apply_committed()

    def _on_role_change(self, role: tuple[Role, int, int | None]) -> None:
        was_leader = self._last_role is not None and self._last_role[0] is Role.LEADER
        self._last_role = role
        if role[0] is Role.LEADER:
            self._epoch_start = self.node.log.end_offset - 1
            log.info("metadata quorum: node %d is the leader of epoch %d", self.node_id, role[1])
        else:
            self._epoch_start = None
            if was_leader:
                self._fail_pending("leadership moved")
            log.info("metadata quorum: node %d is %s in epoch %d (leader %s)", self.node_id, role[0].value,
                     role[1], self.node.leader_id)
        for listener in self._leader_listeners:
            listener()

    def _apply_committed(self) -> None:
        hw = self.node.high_watermark
        if hw <= self.applied_offset:
            return
        entries = self.node.log.read(self.applied_offset, hw - self.applied_offset)
        records: list[MetadataRecord] = [r for e in entries if isinstance(e.value, tuple) for r in e.value]
        self.applied_offset = hw
        before = self.image
        self.image = before.apply(records, hw - 1)
        if records:
            self._notify(before)
        self._resolve_pending()
        self._applied_event.set()
        self._maybe_snapshot()

    def _maybe_snapshot(self) -> None:
        if self._bytes_since_snapshot == 0:
            return
        now = self.clock.monotonic_ms()
        if self._bytes_since_snapshot < self._snapshot_every_bytes and not (
                self._snapshot_every_ms > 0 and now - self._last_snapshot_ms >= self._snapshot_every_ms):
            return
        if self.node.snapshot(self.applied_offset, encode_records(self.image.to_records())):
            self._bytes_since_snapshot = 0
            self._last_snapshot_ms = now
            self._run_actions()

    def _install_image(self, snapshot: Snapshot) -> None:
        assert isinstance(snapshot.data, bytes)
        before = self.image
        self.image = MetadataImage().apply(decode_records(snapshot.data), snapshot.end_offset - 1)
        self.applied_offset = snapshot.end_offset
        self._notify(before)

    def _notify(self, before: MetadataImage) -> None:
        # One listener failing (a partition log that cannot be created on a full disk) must not keep the others
        # from the new image, nor stop the quorum.
        for listener in self._listeners:
            try:
                listener(before, self.image)
            except Exception:
                log.exception("metadata quorum: a listener failed to apply the image at offset %d",
                              self.image.offset)

    # -- outbound requests -----------------------------------------------------------------------------------

    async def _request(self, msg: Message) -> None:
        address = self.voters.get(msg.dst)
        if address is None:
            self._request_failed(msg, "no address")
            return
        number = self._fetches_sent
        if isinstance(msg, FetchRequest):
            self._fetches_sent += 1
        try:
            answer = await self._exchange(msg, address)
        except (ConnectionFailed, TimeoutError, wire.WireError) as exc:
            self._request_failed(msg, str(exc))
            return
        if answer is None and isinstance(msg, _ANSWERED):
            self._request_failed(msg, "an error answer")  # Kafka backs off after an error answer too
        if answer is not None:
            self.node.on_message(answer, self._now())
            self._run_actions()
            if isinstance(answer, FetchResponse) and answer.ok and number > self._answered_fetch:
                self._answered_fetch = number
                self._last_leader_hw = answer.high_watermark
                self._applied_event.set()

    def _request_failed(self, msg: Message, why: str) -> None:
        """Tell the core, which backs off from that member (controller.quorum.retry.backoff.ms)."""
        log.debug("metadata quorum: %s to node %d failed: %s", type(msg).__name__, msg.dst, why)
        self.node.on_request_failed(msg, self._now())

    async def _exchange(self, msg: Message, address: Voter) -> Message | None:
        host, port = address.host, address.port
        match msg:
            case VoteRequest():
                response = await self._call(host, port, wire.encode_vote_request(msg, self.cluster_id))
                vote = wire.decode_vote_response(response, msg.dst, msg.src, msg.pre_vote)
                self._learn_from_answer(response, vote.leader_id if vote is not None else None)
                return vote
            case BeginEpoch():
                await self._call(host, port, wire.encode_begin_epoch(msg, self.cluster_id))
            case EndEpoch():
                await self._call(host, port, wire.encode_end_epoch(msg, self.cluster_id))
            case FetchRequest():
                response = await self._call(host, port, wire.encode_fetch_request(msg, self.cluster_id))
                fetched = wire.decode_fetch_response(response, msg)
                if fetched is not None and not fetched.ok:  # a refusal may name a leader we cannot reach yet
                    self._learn_from_answer(response, fetched.leader_id)
                return fetched
            case FetchSnapshotRequest():
                return await self._fetch_snapshot(msg, host, port)
        return None

    async def _call(self, host: str, port: int, request: Any) -> Any:
        return await self._pool.request(host, port, request, self._request_timeout_s)

    async def _fetch_snapshot(self, msg: FetchSnapshotRequest, host: str, port: int) -> Message | None:
        """Fetch a snapshot in chunks; hands the core the whole of it (or None if the leader no longer has it)."""
        chunks: list[bytes] = []
        position = 0
        while True:
            request = wire.encode_fetch_snapshot_request(msg, self.cluster_id, position)
            code, term, end_offset, epoch, size, chunk = wire.decode_fetch_snapshot_chunk(
                await self._call(host, port, request))
            if code == ErrorCode.snapshot_not_found:
                return wire.snapshot_response(msg.dst, msg.src, term, msg.end_offset, msg.last_epoch, None)
            if code != ErrorCode.none or (end_offset, epoch) != (msg.end_offset, msg.last_epoch):
                return None
            chunks.append(chunk)
            position += len(chunk)
            if position >= size:
                return wire.snapshot_response(msg.dst, msg.src, term, end_offset, epoch, b"".join(chunks))
            if not chunk:
                return None

    # -- inbound requests (controller listener) -------------------------------------------------------------

    def check_cluster_id(self, cluster_id: str | None) -> bool:
        return cluster_id in (None, "", self.cluster_id)

    def handle_vote(self, request: Any) -> Any:
        if not self.check_cluster_id(request.cluster_id):
            return wire.vote_error_response(ErrorCode.inconsistent_cluster_id)
        msg = wire.decode_vote_request(request, self.node_id)
        if not self.dynamic and (msg.src not in self._configured or not self.is_voter):
            return wire.vote_error_response(ErrorCode.inconsistent_voter_set)
        for reply in self.deliver(msg):
            if isinstance(reply, VoteResponse):
                return wire.encode_vote_response(reply, self._address(reply.leader_id))
        return wire.vote_error_response(ErrorCode.unknown_server_error)

    def handle_begin_epoch(self, request: Any) -> Any:
        if not self.check_cluster_id(request.cluster_id):
            return wire.begin_epoch_response(ErrorCode.inconsistent_cluster_id, self.node.leader_id, self.node.term)
        self.deliver(wire.decode_begin_epoch(request, self.node_id))
        return wire.begin_epoch_response(ErrorCode.none, self.node.leader_id, self.node.term)

    def handle_end_epoch(self, request: Any) -> Any:
        if not self.check_cluster_id(request.cluster_id):
            return wire.end_epoch_response(ErrorCode.inconsistent_cluster_id, self.node.leader_id, self.node.term)
        self.deliver(wire.decode_end_epoch(request, self.node_id))
        return wire.end_epoch_response(ErrorCode.none, self.node.leader_id, self.node.term)

    def handle_fetch(self, request: Any) -> Any:
        """A voter's or observer's fetch of the metadata log. Raises KafkaError for a foreign cluster."""
        if not self.check_cluster_id(request.cluster_id):
            raise KafkaError(ErrorCode.inconsistent_cluster_id)
        msg = wire.decode_fetch_request(request, self.node_id)
        for reply in self.deliver(msg):
            if isinstance(reply, FetchResponse):
                leader = reply.src if reply.ok else reply.leader_id
                return wire.encode_fetch_response(reply, self.node.log.start_offset, self._address(leader))
        not_leader = FetchResponse(self.node_id, msg.src, self.node.term, False, msg.offset, (), 0,
                                   leader_id=self.node.leader_id)
        return wire.encode_fetch_response(not_leader, self.node.log.start_offset, self._address(not_leader.leader_id))

    def handle_fetch_snapshot(self, request: Any) -> Any:
        if not self.check_cluster_id(request.cluster_id):
            raise KafkaError(ErrorCode.inconsistent_cluster_id)
        msg, position = wire.decode_fetch_snapshot_request(request, self.node_id)
        for reply in self.deliver(msg):
            if isinstance(reply, FetchSnapshotResponse):
                return wire.encode_fetch_snapshot_response(reply, position, request.max_bytes, self.node.leader_id)
        refused = FetchSnapshotResponse(self.node_id, msg.src, self.node.term, False, None)
        return wire.encode_fetch_snapshot_response(refused, position, request.max_bytes, self.node.leader_id)
