"""A worker's membership in its Connect group: FindCoordinator, JoinGroup (protocol type `connect`), SyncGroup,
Heartbeat and LeaveGroup, on Moldau's own asyncio Kafka client in a thread of its own.

Why not a Kafka client library: confluent-kafka cannot carry a protocol type other than `consumer`, and
kafka-python's coordinator is tied to its own network manager; the group API is five requests, which Moldau's
client (the one brokers use between themselves) already encodes.

The connections take the worker's `security.*`, `ssl.*` and `sasl.*` settings (TLS, SASL PLAIN or SCRAM), as its
other clients do.

The member offers the protocols of `connect.protocol` (`sessioned` offers `sessioned`, `compatible` then
`default`, `compatible` the last two, `eager` only `default`); the coordinator picks one all members support,
which the herder is told with each assignment (a `sessioned` worker in a group with a `compatible` one does not
sign, as in Kafka). Each round it reports what it runs
(`GroupListener.metadata`), the leader decides (`perform_assignment`), and every member applies its assignment
(`on_assignment`, in a thread so that heartbeats go on meanwhile). A member that had something revoked rejoins
as soon as it has stopped it; every member rejoins when the scheduled delay of its assignment ends, when the
coordinator says a rebalance is in progress, or when the herder asks (`request_rejoin`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import request as find_req
from kio.schema.heartbeat.v3 import request as heartbeat_req
from kio.schema.join_group.v5 import request as join_req
from kio.schema.leave_group.v3 import request as leave_req
from kio.schema.sync_group.v3 import request as sync_req

from moldau.connect.distributed.protocol import (
    CONNECT_PROTOCOL_TYPE,
    Assignment,
    MemberMetadata,
    ProtocolError,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
    protocol_version,
)
from moldau.net.client import Authenticator, ConnectionFailed, ConnectionPool
from moldau.protocol.codec import make
from moldau.security.client_security import PLAINTEXT, ClientSecurity

__all__ = ["PROTOCOLS", "GroupListener", "GroupMember", "MemberSettings"]

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.5
EAGER_PROTOCOLS = ["default"]
COMPATIBLE_PROTOCOLS = ["compatible", "default"]
SESSIONED_PROTOCOLS = ["sessioned", "compatible", "default"]
PROTOCOLS = {"eager": EAGER_PROTOCOLS, "compatible": COMPATIBLE_PROTOCOLS, "sessioned": SESSIONED_PROTOCOLS}


class GroupListener(ABC):
    """What the group asks of the herder. Every method may block; the member calls them in a thread."""

    @abstractmethod
    def metadata(self) -> MemberMetadata: ...

    @abstractmethod
    def perform_assignment(self, leader: str, protocol: str, members: dict[str, MemberMetadata]
                           ) -> dict[str, Assignment]: ...

    @abstractmethod
    def on_assignment(self, assignment: Assignment, generation: int, member_id: str, protocol: str) -> None:
        """Apply `assignment`; `protocol` is the one the group chose (`default` is the eager one)."""

    @abstractmethod
    def revoke_all(self) -> None:
        """The eager protocol: stop everything before joining."""

    @abstractmethod
    def on_group_lost(self) -> None:
        """The member is out of the group (left, or its generation is gone); the leader is unknown until it joins."""


@dataclass(frozen=True)
class MemberSettings:
    bootstrap: list[tuple[str, int]]
    group_id: str
    client_id: str
    session_timeout_ms: int
    heartbeat_interval_ms: int
    rebalance_timeout_ms: int
    protocols: list[str]
    security: ClientSecurity = PLAINTEXT
    authenticator: Authenticator | None = None


class _Rejoin(Exception):
    """Join the group again (after a backoff when `backoff`)."""

    def __init__(self, reason: str, backoff: bool = False) -> None:
        super().__init__(reason)
        self.backoff = backoff


class GroupMember:
    def __init__(self, settings: MemberSettings, listener: GroupListener) -> None:
        self.settings = settings
        self.listener = listener
        self.member_id = ""
        self.generation = -1
        self.coordinator: tuple[str, int] | None = None
        self.pool = ConnectionPool(settings.client_id, settings.security, settings.authenticator)
        self.thread = threading.Thread(target=self._thread_main, name="connect-group-member", daemon=True)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.rejoin_event: asyncio.Event | None = None
        self.stop_event: asyncio.Event | None = None
        self.started = threading.Event()

    # --- called from other threads ----------------------------------------------------------------------

    def start(self) -> None:
        self.thread.start()
        self.started.wait(10)

    def request_rejoin(self) -> None:
        if self.loop is not None and self.rejoin_event is not None:
            self.loop.call_soon_threadsafe(self.rejoin_event.set)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Leave the group and end the thread."""
        if self.loop is not None and self.stop_event is not None:
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(timeout_s)

    # --- the member's own thread ------------------------------------------------------------------------

    def _thread_main(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.rejoin_event, self.stop_event = asyncio.Event(), asyncio.Event()
        self.started.set()
        while not self.stop_event.is_set():
            try:
                if self.coordinator is None:
                    self.coordinator = await self._find_coordinator()
                assignment, protocol = await self._join_and_sync()
                await self._run_generation(assignment, protocol)
            except _Rejoin as exc:
                log.info("connect: rejoining the group: %s", exc)
                if exc.backoff:
                    await self._sleep(RETRY_BACKOFF_S)
            except (ConnectionFailed, TimeoutError, OSError) as exc:
                log.warning("connect: the group coordinator is unreachable (%s); looking it up again", exc)
                self.coordinator = None
                await self._sleep(RETRY_BACKOFF_S)
        await self._leave()
        self.pool.close()

    async def _sleep(self, seconds: float) -> None:
        assert self.stop_event is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop_event.wait(), seconds)

    async def _send(self, request: object, to: tuple[str, int] | None = None) -> object:
        host, port = to or self.coordinator or self.settings.bootstrap[0]
        return await self.pool.request(host, port, request, REQUEST_TIMEOUT_S)

    async def _find_coordinator(self) -> tuple[str, int]:
        for address in self.settings.bootstrap:
            try:
                response = await self._send(find_req.FindCoordinatorRequest(key=self.settings.group_id), address)
            except (ConnectionFailed, TimeoutError, OSError):
                continue
            if response.error_code == ErrorCode.none:  # type: ignore[attr-defined]
                return str(response.host), int(response.port)  # type: ignore[attr-defined]
        raise _Rejoin("no group coordinator yet", backoff=True)

    def _coordinator_error(self, error: ErrorCode, what: str) -> _Rejoin:
        if error in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                     ErrorCode.coordinator_load_in_progress):
            self.coordinator = None
            return _Rejoin(f"{what}: {error.name}", backoff=True)
        if error == ErrorCode.unknown_member_id:
            self.member_id = ""
        if error in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
            self.generation = -1
            self.listener.on_group_lost()
        return _Rejoin(f"{what}: {error.name}",
                       backoff=error not in (ErrorCode.rebalance_in_progress, ErrorCode.unknown_member_id,
                                             ErrorCode.illegal_generation))

    async def _join_and_sync(self) -> tuple[Assignment, str]:
        assert self.rejoin_event is not None
        # Requests to rejoin from now on are served by this join, or (if they come after it) by the next.
        self.rejoin_event.clear()
        eager = self.settings.protocols == EAGER_PROTOCOLS
        if eager:
            await asyncio.to_thread(self.listener.revoke_all)
        metadata = await asyncio.to_thread(self.listener.metadata)
        protocols = tuple(join_req.JoinGroupRequestProtocol(name=name, metadata=encode_metadata(
            metadata, protocol_version(name))) for name in self.settings.protocols)
        while True:
            join = await self._send(make(join_req.JoinGroupRequest,
                group_id=self.settings.group_id,
                session_timeout=datetime.timedelta(milliseconds=self.settings.session_timeout_ms),
                rebalance_timeout=datetime.timedelta(milliseconds=self.settings.rebalance_timeout_ms),
                member_id=self.member_id, protocol_type=CONNECT_PROTOCOL_TYPE, protocols=protocols))
            error = join.error_code  # type: ignore[attr-defined]
            if error == ErrorCode.member_id_required:
                self.member_id = str(join.member_id)  # type: ignore[attr-defined]
                continue
            if error != ErrorCode.none:
                raise self._coordinator_error(error, "JoinGroup")
            break
        self.member_id = str(join.member_id)  # type: ignore[attr-defined]
        self.generation = int(join.generation_id)  # type: ignore[attr-defined]
        protocol = str(join.protocol_name)  # type: ignore[attr-defined]
        assignments: tuple[sync_req.SyncGroupRequestAssignment, ...] = ()
        if join.leader == self.member_id:  # type: ignore[attr-defined]
            assignments = await self._assign(protocol, join.members)  # type: ignore[attr-defined]
        sync = await self._send(make(sync_req.SyncGroupRequest,
            group_id=self.settings.group_id, generation_id=self.generation, member_id=self.member_id,
            assignments=assignments))
        if sync.error_code != ErrorCode.none:  # type: ignore[attr-defined]
            raise self._coordinator_error(sync.error_code, "SyncGroup")  # type: ignore[attr-defined]
        try:
            return decode_assignment(bytes(sync.assignment)), protocol  # type: ignore[attr-defined]
        except ProtocolError as exc:
            raise _Rejoin(f"undecodable assignment: {exc}", backoff=True) from None

    async def _assign(self, protocol: str, members: tuple[object, ...]
                      ) -> tuple[sync_req.SyncGroupRequestAssignment, ...]:
        metadata = {str(m.member_id): decode_metadata(bytes(m.metadata)) for m in members}  # type: ignore[attr-defined]
        decided = await asyncio.to_thread(self.listener.perform_assignment, self.member_id, protocol, metadata)
        version = protocol_version(protocol)
        return tuple(sync_req.SyncGroupRequestAssignment(member_id=member, assignment=encode_assignment(a, version))
                     for member, a in decided.items())

    async def _run_generation(self, assignment: Assignment, protocol: str) -> None:
        """Apply the assignment while heartbeating; return when the member must rejoin (and has applied it)."""
        assert self.rejoin_event is not None and self.stop_event is not None
        log.info("connect: joined generation %d as %s (leader %s, protocol %s): +%s -%s, delay %d ms",
                 self.generation, self.member_id, assignment.leader, protocol, _show(assignment.assigned),
                 _show(assignment.revoked), assignment.delay_ms)
        applying = asyncio.ensure_future(asyncio.to_thread(
            self.listener.on_assignment, assignment, self.generation, self.member_id, protocol))
        rejoin_at = time.monotonic() + assignment.delay_ms / 1000 if assignment.delay_ms > 0 else None
        must_rejoin = bool(assignment.revoked) or assignment.error != 0
        try:
            while not self.stop_event.is_set():
                if (must_rejoin or self.rejoin_event.is_set()) and applying.done():
                    break
                if rejoin_at is not None and time.monotonic() >= rejoin_at and applying.done():
                    break
                wait_s = self.settings.heartbeat_interval_ms / 1000
                if rejoin_at is not None:
                    wait_s = max(0.0, min(wait_s, rejoin_at - time.monotonic()))
                await self._wait_any(wait_s, applying)
                if not must_rejoin:
                    must_rejoin = await self._heartbeat()
        finally:
            await applying

    async def _wait_any(self, seconds: float, applying: asyncio.Future[None]) -> None:
        assert self.rejoin_event is not None and self.stop_event is not None
        waits = [asyncio.ensure_future(self.rejoin_event.wait()), asyncio.ensure_future(self.stop_event.wait())]
        if not applying.done():
            waits.append(applying)  # type: ignore[arg-type]
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        for waiter in waits[:2]:
            waiter.cancel()

    async def _heartbeat(self) -> bool:
        """True when the group needs this member to rejoin."""
        response = await self._send(make(heartbeat_req.HeartbeatRequest,
            group_id=self.settings.group_id, generation_id=self.generation, member_id=self.member_id))
        error = response.error_code  # type: ignore[attr-defined]
        if error == ErrorCode.none:
            return False
        log.info("connect: heartbeat: %s", error.name)
        if error in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
            self.coordinator = None
        if error in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
            self._coordinator_error(error, "Heartbeat")
        return True

    async def _leave(self) -> None:
        if not self.member_id or self.coordinator is None:
            return
        try:
            await self._send(make(leave_req.LeaveGroupRequest, group_id=self.settings.group_id, members=(
                leave_req.MemberIdentity(member_id=self.member_id),)))
            log.info("connect: left the group %s", self.settings.group_id)
        except (ConnectionFailed, TimeoutError, OSError) as exc:
            log.warning("connect: LeaveGroup failed: %s", exc)


def _show(allocation: object) -> str:
    connectors = sorted(getattr(allocation, "connectors", ()))
    tasks = sorted(f"{c}-{t}" for c, t in getattr(allocation, "tasks", ()))
    return "[" + ", ".join([*connectors, *tasks]) + "]"
