"""A member of a classic group, and the data the group exchanges with its callers.

Pending requests are data: a JoinGroup or SyncGroup that has to wait for other members is held as the caller's
`Handle`; the group answers it later by returning a `Completion` for that handle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from moldau.protocol.errors import ErrorCode

# Chosen by the caller, unique among its pending requests; the group only stores and returns it.
Handle = int

UNKNOWN_MEMBER_ID = ""


class ProtocolMetadata(NamedTuple):
    """One embedded protocol a member supports (e.g. an assignor name) with its opaque metadata."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup as the group needs it. `require_known_member_id` is the KIP-394 handshake (JoinGroup v4+)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[ProtocolMetadata, ...]
    require_known_member_id: bool = True


@dataclass(frozen=True, slots=True)
class SyncRequest:
    member_id: str
    group_instance_id: str | None
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]  # (member id, assignment); only the leader sends any


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """What the leader learns of each member: its id and its metadata for the selected protocol."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()  # only the leader's result lists them
    # KIP-814: the leader rejoined without a rebalance; it gets the members but must not reassign.
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    """The answer to a pending request, identified by the handle its caller passed in."""

    handle: Handle
    result: JoinResult | SyncResult


@dataclass(slots=True)
class Effects:
    """What one input to a group produced.

    `completions` are the requests answered by this input. `persist` says the group's durable form changed
    (a new generation with its assignments, or a static member's new id): the caller writes the group's
    record before it delivers the completions, so no member acts on an assignment that is not durable.
    """

    completions: list[Completion] = field(default_factory=list)
    persist: bool = False

    def complete(self, handle: Handle, result: JoinResult | SyncResult) -> None:
        self.completions.append(Completion(handle, result))

    def merge(self, other: Effects) -> None:
        self.completions += other.completions
        self.persist = self.persist or other.persist


@dataclass(slots=True)
class ClassicMember:
    """A member of a classic group.

    Invariants: `protocols` is non-empty and in the member's order of preference; a member waits for at most one
    JoinGroup (`awaiting_join`) and one SyncGroup (`awaiting_sync`) at a time.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[ProtocolMetadata, ...]
    assignment: bytes = b""
    awaiting_join: Handle | None = None
    awaiting_sync: Handle | None = None
    session_deadline_ms: int = 0

    @classmethod
    def from_request(cls, member_id: str, request: JoinRequest) -> ClassicMember:
        return cls(member_id, request.group_instance_id, request.client_id, request.client_host,
                   request.session_timeout_ms, request.rebalance_timeout_ms, request.protocol_type,
                   request.protocols)

    def update(self, request: JoinRequest) -> None:
        """Take what a rejoin may change: client, timeouts and protocols."""
        self.client_id, self.client_host = request.client_id, request.client_host
        self.session_timeout_ms = request.session_timeout_ms
        self.rebalance_timeout_ms = request.rebalance_timeout_ms
        self.protocols = request.protocols

    def protocol_names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.protocols)

    def metadata(self, protocol: str) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: tuple[ProtocolMetadata, ...]) -> bool:
        """A rejoin with these protocols changes nothing the group's assignment depends on."""
        return self.protocols == protocols

    def vote(self, candidates: frozenset[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        return next(p.name for p in self.protocols if p.name in candidates)

    def is_static(self) -> bool:
        return self.group_instance_id is not None
