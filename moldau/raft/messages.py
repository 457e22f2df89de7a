"""Messages between nodes and the actions a node asks its driver to perform.

Every message carries the sender's term (the KRaft epoch). Actions are returned in order; the
driver must make each persist action durable before it sends any message that follows it, and
before it acts on a high watermark that covers it (applies entries, acknowledges a proposal).
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.raft.log import Entry, Snapshot


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A (pre-)vote request; for a pre-vote `term` is the term the candidate would start (§9.6 thesis)."""

    src: int
    dst: int
    term: int
    last_epoch: int
    end_offset: int
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    """`leader_id` is the leader of `term` the voter follows, if any, as in Kafka's Vote response. The core
    acts on it only when the voter is that leader (see `RaftNode._on_vote_response`)."""

    src: int
    dst: int
    term: int
    granted: bool
    pre_vote: bool
    leader_id: int | None = None


@dataclass(frozen=True, slots=True)
class BeginEpoch:
    """Sent by a new leader so that voters learn of it without waiting for an election timeout."""

    src: int
    dst: int
    term: int


@dataclass(frozen=True, slots=True)
class EndEpoch:
    """Sent by a resigning leader to the other voters, so that they elect a successor at once."""

    src: int
    dst: int
    term: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower or observer asks for entries from `offset`; `last_epoch` is the epoch of the entry before it."""

    src: int
    dst: int
    term: int
    offset: int
    last_epoch: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Entries from the requested offset, or a divergence hint: truncate to `diverging_end` and retry.

    `ok` is False when the receiver is not the leader of the fetcher's term (or the fetch was stale):
    then only `term` and `leader_id`, the leader the receiver knows of, are meaningful.
    `snapshot_id = (end_offset, last_epoch)` says that the fetch offset (or the divergence point) is
    below the leader's log start: fetch that snapshot with `FetchSnapshotRequest`.
    `last_epoch` echoes the request's: with `offset` it names the fetcher's log prefix (Log Matching),
    so a duplicated or delayed answer is recognised even if the log end came back to `offset`.
    """

    src: int
    dst: int
    term: int
    ok: bool
    offset: int
    entries: tuple[Entry, ...]
    high_watermark: int
    diverging_end: int | None = None
    leader_id: int | None = None
    snapshot_id: tuple[int, int] | None = None
    last_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """Ask the leader for its snapshot `(end_offset, last_epoch)`, named by a FetchResponse."""

    src: int
    dst: int
    term: int
    end_offset: int
    last_epoch: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    """The snapshot asked for, or None when the leader no longer has it; `ok` False from a non-leader."""

    src: int
    dst: int
    term: int
    ok: bool
    snapshot: Snapshot | None


Message = (VoteRequest | VoteResponse | BeginEpoch | EndEpoch | FetchRequest | FetchResponse
           | FetchSnapshotRequest | FetchSnapshotResponse)


@dataclass(frozen=True, slots=True)
class SetTermVote:
    term: int
    voted_for: int | None


@dataclass(frozen=True, slots=True)
class Append:
    offset: int
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class Truncate:
    """Remove every entry at `offset` and after."""

    offset: int


@dataclass(frozen=True, slots=True)
class SaveSnapshot:
    """Make `snapshot` durable as the latest snapshot; after that, entries below its end may be deleted."""

    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    """Make `snapshot` durable, discard the whole log, and reset the state machine from `snapshot.data`.

    The log is then empty and continues at `snapshot.end_offset`.
    """

    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class Send:
    message: Message


Action = SetTermVote | Append | Truncate | SaveSnapshot | InstallSnapshot | Send
