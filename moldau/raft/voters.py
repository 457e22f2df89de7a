"""The voter set of a dynamic quorum (KIP-853): `VotersRecord` control entries and their history in a log.

A voter set changes by appending a `VotersRecord` to the log, and a node uses the newest one its log holds,
committed or not (Raft thesis §4.1: a configuration takes effect when appended). A truncation that removes a
record therefore reverts the node to the set before it. A snapshot carries the set in effect at its end, so the
records below it may go. Without any record (a static quorum, `kraft.version` 0) the set is the configured one.

Single-server changes only: each record adds or removes one voter (or changes one voter's endpoints), and the
leader appends a record only once the previous one is committed; any two consecutive sets then have a voter in
common in every majority, which is what keeps two leaders out of one epoch.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener a voter serves the quorum on (name as in `controller.listener.names`)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class VoterInfo:
    """One voter: its node id, the id of its metadata log directory (KIP-853's replica key), its endpoints."""

    node_id: int
    directory_id: uuid.UUID | None = None
    endpoints: tuple[Endpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class VotersRecord:
    """The whole voter set, as the value of a log entry (or of a snapshot)."""

    voters: tuple[VoterInfo, ...]

    @classmethod
    def of(cls, ids: Iterable[int]) -> VotersRecord:
        return cls(tuple(VoterInfo(i) for i in sorted(ids)))

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(v.node_id for v in self.voters)

    def get(self, node_id: int) -> VoterInfo | None:
        return next((v for v in self.voters if v.node_id == node_id), None)


class VoterHistory:
    """The voter sets a log defines: a base set (configured, or from the snapshot) and one per record.

    Offsets are those of the records in the log; the set in effect for a prefix ending at `offset` is the
    newest record below it.
    """

    def __init__(self, static: frozenset[int], snapshot_voters: VotersRecord | None = None) -> None:
        self._static = VotersRecord.of(static)
        self._base: VotersRecord | None = snapshot_voters  # None: no record yet, the static set applies
        self._records: list[tuple[int, VotersRecord]] = []

    @property
    def dynamic(self) -> bool:
        """True once the log (or the snapshot) holds a VotersRecord: `kraft.version` 1."""
        return self._base is not None or bool(self._records)

    def latest(self) -> VotersRecord:
        if self._records:
            return self._records[-1][1]
        return self._base or self._static

    def all_ids(self) -> frozenset[int]:
        """Every node that is or was a voter as far as this history knows (configured, base and records)."""
        ids = set(self._static.ids)
        for record in [self._base, *(r for _, r in self._records)]:
            if record is not None:
                ids |= record.ids
        return frozenset(ids)

    def latest_offset(self) -> int | None:
        """Offset of the newest record in the log, None if only the base set is known."""
        return self._records[-1][0] if self._records else None

    def records(self) -> list[tuple[int, VotersRecord]]:
        return list(self._records)

    def at(self, end_offset: int) -> VotersRecord | None:
        """The record in effect for the prefix below `end_offset`; None for a static set."""
        found = self._base
        for offset, record in self._records:
            if offset < end_offset:
                found = record
        return found

    def append(self, offset: int, values: Iterable[object]) -> bool:
        """Note the records among the values appended from `offset`; True if the set changed."""
        changed = False
        for index, value in enumerate(values):
            if isinstance(value, VotersRecord):
                self._records.append((offset + index, value))
                changed = True
        return changed

    def truncate(self, offset: int) -> bool:
        """Forget the records at `offset` and after; True if the set changed."""
        kept = [(o, r) for o, r in self._records if o < offset]
        changed = len(kept) != len(self._records)
        self._records = kept
        return changed

    def compact(self, end_offset: int) -> None:
        """A snapshot now covers the prefix below `end_offset`: its set becomes the base."""
        self._base = self.at(end_offset)
        self._records = [(o, r) for o, r in self._records if o >= end_offset]

    def reset(self, snapshot_voters: VotersRecord | None) -> None:
        """The log was replaced by a snapshot: only the snapshot's set remains (the static one if it has none)."""
        self._base, self._records = snapshot_voters, []
