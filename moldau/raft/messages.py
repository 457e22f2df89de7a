"""Messages between voters and the actions a node asks its driver to perform.

Every message carries the sender's term (the KRaft epoch). Actions are returned in order; the
driver must make each persist action durable before it sends any message that follows it.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.raft.log import Entry


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
    src: int
    dst: int
    term: int
    granted: bool
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class BeginEpoch:
    """Sent by a new leader so that voters learn of it without waiting for an election timeout."""

    src: int
    dst: int
    term: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower asks for entries from `offset`; `last_epoch` is the epoch of the entry before it."""

    src: int
    dst: int
    term: int
    offset: int
    last_epoch: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Entries from the requested offset, or a divergence hint: truncate to `diverging_end` and retry.

    `ok` is False when the leader rejected the fetch (stale term); then only `term` is meaningful.
    """

    src: int
    dst: int
    term: int
    ok: bool
    offset: int
    entries: tuple[Entry, ...]
    high_watermark: int
    diverging_end: int | None = None


Message = VoteRequest | VoteResponse | BeginEpoch | FetchRequest | FetchResponse


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
class Send:
    message: Message


Action = SetTermVote | Append | Truncate | Send
