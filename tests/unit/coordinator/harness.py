"""A driver for one classic group: fake time, predictable member ids, answers collected by handle."""

from __future__ import annotations

from moldau.coordinator.group.classic import ClassicGroup, GroupLimits, GroupState
from moldau.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from moldau.coordinator.group.member import (
    Effects,
    Handle,
    JoinRequest,
    JoinResult,
    ProtocolMetadata,
    SyncRequest,
    SyncResult,
)
from moldau.protocol.errors import ErrorCode

START_MS = 1_700_000_000_000
SESSION_MS = 10_000
REBALANCE_MS = 30_000
LIMITS = GroupLimits(min_session_timeout_ms=1000, max_session_timeout_ms=60_000, initial_rebalance_delay_ms=0)


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 for `topics` (no user data)."""
    out = bytearray(b"\x00\x00") + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return bytes(out + b"\xff\xff\xff\xff")


RANGE = (ProtocolMetadata("range", subscription("t")),)


class SequentialIds:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}-{self.count}"


class Driver:
    def __init__(self, limits: GroupLimits = LIMITS, group: ClassicGroup | None = None) -> None:
        self.now = START_MS
        self.group = group or ClassicGroup("g", limits, self.now, SequentialIds())
        self.results: dict[Handle, JoinResult | SyncResult] = {}
        self.persists = 0
        self._handles = 0

    def take(self, fx: Effects) -> None:
        for c in fx.completions:
            assert c.handle not in self.results, f"handle {c.handle} answered twice"
            self.results[c.handle] = c.result
        self.persists += fx.persist

    def _handle(self) -> Handle:
        self._handles += 1
        return self._handles

    def join(self, member_id: str = "", *, instance: str | None = None,
             protocols: tuple[ProtocolMetadata, ...] = RANGE, session_ms: int = SESSION_MS,
             rebalance_ms: int = REBALANCE_MS, protocol_type: str = CONSUMER_PROTOCOL_TYPE,
             handshake: bool = True, client: str = "client") -> Handle:
        handle = self._handle()
        request = JoinRequest(member_id, instance, client, "/127.0.0.1", session_ms, rebalance_ms, protocol_type,
                              protocols, handshake)
        self.take(self.group.join(handle, request, self.now))
        return handle

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, *,
             instance: str | None = None) -> Handle:
        handle = self._handle()
        request = SyncRequest(member_id, instance, generation, None, None, tuple((assignments or {}).items()))
        self.take(self.group.sync(handle, request, self.now))
        return handle

    def heartbeat(self, member_id: str, generation: int | None = None, instance: str | None = None) -> ErrorCode:
        gen = self.group.generation_id if generation is None else generation
        return self.group.heartbeat(member_id, instance, gen, self.now)

    def leave(self, *identities: tuple[str, str | None]) -> tuple[ErrorCode, ...]:
        result = self.group.leave(list(identities), self.now)
        self.take(result.effects)
        return result.member_errors

    def advance(self, ms: int) -> None:
        self.now += ms
        self.take(self.group.tick(self.now))

    def join_result(self, handle: Handle) -> JoinResult:
        result = self.results[handle]
        assert isinstance(result, JoinResult)
        return result

    def sync_result(self, handle: Handle) -> SyncResult:
        result = self.results[handle]
        assert isinstance(result, SyncResult)
        return result

    def pending(self, handle: Handle) -> bool:
        return handle not in self.results

    def new_member(self, client: str = "client",
                   protocols: tuple[ProtocolMetadata, ...] = RANGE) -> tuple[str, Handle]:
        """The KIP-394 handshake, then the real join; returns the member id and the second join's handle."""
        required = self.join_result(self.join(client=client, protocols=protocols))
        assert required.error == ErrorCode.member_id_required
        return required.member_id, self.join(required.member_id, client=client, protocols=protocols)

    def stable_group(self, count: int) -> list[str]:
        """`count` members through join and sync into one generation; returns member ids, leader first."""
        ids = [self.new_member(client=f"c{i}")[0] for i in range(count)]
        # With no initial delay the first join completes alone; members that must rejoin do so now.
        for member_id in ids:
            if self.group.members[member_id].awaiting_join is None and self.group.state.value != "CompletingRebalance":
                self.join(member_id)
        generation, leader = self.group.generation_id, self.group.leader_id
        assert leader is not None
        for member_id in ids:
            if member_id != leader:
                self.sync(member_id, generation)
        self.sync(leader, generation, {m: m.encode() for m in ids})
        assert self.group.state.value == "Stable", self.group.state
        return [leader] + [m for m in ids if m != leader]


def state_of(group: ClassicGroup) -> GroupState:
    """The group's state, read anew: mypy keeps what an earlier assert narrowed `group.state` to across the calls
    that change it."""
    return group.state
