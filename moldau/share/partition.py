"""One share-partition (KIP-932): which records of a topic partition a share group still has to deliver, sans-I/O.

The records between the share-partition start offset (SPSO) and the next offset never handed out form the
in-flight window; each of them is in one state:

- Available: may be acquired by any member (again, after a release or an expired lock);
- Acquired: handed to one member, locked for `share.record.lock.duration.ms`; only that member may acknowledge it;
- Acknowledged: processed (ACCEPT);
- Archived: given up (REJECT, a GAP the consumer found no record at, or released/expired once it reached
  `share.delivery.count.limit` deliveries).

When the group has a dead-letter topic (`dead_letter`), every record archived because a member REJECTed it or
because it used up its deliveries is also noted in `archived` (an `ArchivedRecord` event), for the I/O layer to
copy to that topic; records archived for a GAP or because the log no longer has them are not.

Every acquisition counts one delivery. A record released (or whose lock expires) after its last allowed delivery
is archived instead of made available again, so no record is delivered more than the limit. The SPSO moves past
the contiguous Acknowledged/Archived prefix and never goes back. At most `share.partition.max.record.locks`
records are in flight: new offsets are acquired only while the window is below that size.

Time is passed in (`now_ms`); expired locks are processed at the start of every operation and by `expire`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from moldau.protocol.errors import ErrorCode

DEFAULT_LOCK_DURATION_MS = 30_000
DEFAULT_DELIVERY_COUNT_LIMIT = 5
DEFAULT_MAX_RECORD_LOCKS = 2000


class RecordState(IntEnum):
    """Kafka's numbering of in-flight record states (as `__share_group_state` stores them)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """Acknowledgement types of ShareFetch/ShareAcknowledge; GAP marks offsets that hold no record."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


FINAL_STATES = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """The share group configs a share-partition obeys."""

    record_lock_duration_ms: int = DEFAULT_LOCK_DURATION_MS
    delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    max_record_locks: int = DEFAULT_MAX_RECORD_LOCKS
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"  # share.isolation.level
    dead_letter: bool = False  # note archived records for a dead-letter topic

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"


class ArchiveReason(IntEnum):
    REJECTED = 1
    DELIVERY_COUNT_EXCEEDED = 2


@dataclass(frozen=True, slots=True)
class ArchivedRecord:
    """A record given up on: what a dead-letter topic gets told."""

    offset: int
    delivery_count: int
    reason: ArchiveReason


@dataclass(slots=True)
class InFlightRecord:
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: int | None = None


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """Records handed to a member: ShareFetch's AcquiredRecords."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    """An AcknowledgementBatch: one type for the whole range, or one type per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]

    def type_of(self, offset: int) -> int:
        return self.types[0] if len(self.types) == 1 else self.types[offset - self.first_offset]


class AcknowledgeError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class SharePartition:
    settings: ShareSettings
    start_offset: int  # the SPSO: every offset below it is done
    next_offset: int = -1  # one past the last offset ever acquired (the SPEO is next_offset - 1); -1: = SPSO
    records: dict[int, InFlightRecord] = field(default_factory=dict)  # every offset of [start, next)
    archived: list[ArchivedRecord] = field(default_factory=list)  # events, when settings.dead_letter; see take_archived

    def __post_init__(self) -> None:
        if self.next_offset < self.start_offset:
            self.next_offset = self.start_offset

    @classmethod
    def initial(cls, settings: ShareSettings, log_start: int, log_end: int) -> SharePartition:
        """A share-partition seen for the first time: `share.auto.offset.reset` picks its SPSO."""
        start = log_start if settings.auto_offset_reset == "earliest" else log_end
        return cls(settings, start)

    @classmethod
    def restore(cls, settings: ShareSettings, start_offset: int,
                batches: Iterable[tuple[int, int, int, int]]) -> SharePartition:
        """A share-partition from its durable state: the SPSO and (first, last, state, delivery count) batches.
        Offsets of the window no batch names are Available, never delivered. A record not done that has used up
        its deliveries is archived (and announced, for a dead-letter topic): its last delivery (written while it was
        acquired) ended with the leader."""
        restored = cls(settings, start_offset)
        for first, last, state, count in batches:
            for offset in range(max(first, start_offset), last + 1):
                if state in FINAL_STATES:
                    kept = RecordState(state)
                else:
                    used_up = count >= settings.delivery_count_limit
                    kept = RecordState.ARCHIVED if used_up else RecordState.AVAILABLE
                restored.records[offset] = InFlightRecord(kept, count)
                if state not in FINAL_STATES and kept == RecordState.ARCHIVED:
                    restored._note_archived(offset, restored.records[offset], ArchiveReason.DELIVERY_COUNT_EXCEEDED)
            restored.next_offset = max(restored.next_offset, last + 1)
        for offset in range(start_offset, restored.next_offset):
            restored.records.setdefault(offset, InFlightRecord())
        restored._advance()
        return restored

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """The window as durable (first, last, state, delivery count) batches. An acquisition is not durable:
        an Acquired record is written as Available with the deliveries it has had, so after a restart it is
        delivered again, never more often than the limit allows."""
        out: list[tuple[int, int, int, int]] = []
        for offset in range(self.start_offset, self.next_offset):
            record = self.records[offset]
            state = RecordState.AVAILABLE if record.state == RecordState.ACQUIRED else record.state
            last = out[-1] if out else None
            if last is not None and last[1] + 1 == offset and last[2] == state and last[3] == record.delivery_count:
                out[-1] = (last[0], offset, last[2], last[3])
            else:
                out.append((offset, offset, int(state), record.delivery_count))
        return out

    # -- views ---------------------------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        """The SPEO: the last offset in flight (start - 1 when nothing is)."""
        return self.next_offset - 1

    def in_flight(self) -> int:
        """The size of the window [SPSO, SPEO], whatever its records' states (what max_record_locks bounds)."""
        return self.next_offset - self.start_offset

    def delivering_count(self) -> int:
        """Records of the window whose delivery is under way: acquired by a member, or available again after at
        least one delivery (released, or their lock expired). What `moldau groups describe` calls in flight."""
        return sum(1 for r in self.records.values()
                   if r.state == RecordState.ACQUIRED or (r.state == RecordState.AVAILABLE and r.delivery_count > 0))

    def state_of(self, offset: int) -> InFlightRecord | None:
        return self.records.get(offset)

    def acquired_by(self, member_id: str) -> list[int]:
        return [o for o, r in self.records.items() if r.state == RecordState.ACQUIRED and r.member_id == member_id]

    def next_deadline_ms(self) -> int | None:
        deadlines = [r.lock_deadline_ms for r in self.records.values()
                     if r.state == RecordState.ACQUIRED and r.lock_deadline_ms is not None]
        return min(deadlines) if deadlines else None

    def first_acquirable(self, log_end: int) -> int | None:
        """The first offset `acquire` would take now (after `expire`), or None: what a fetch waiting for
        `min_bytes` measures from."""
        available = [o for o, r in self.records.items() if r.state == RecordState.AVAILABLE]
        if available:
            return min(available)
        if self.next_offset < log_end and self.in_flight() < self.settings.max_record_locks:
            return self.next_offset
        return None

    # -- operations ----------------------------------------------------------------------------------------

    def acquire(self, member_id: str, max_records: int, log_end: int, now_ms: int) -> list[AcquiredRange]:
        """Lock up to `max_records` records for the member: available ones in the window first, then new offsets
        below `log_end` while the window has room. Each counts one more delivery."""
        self.expire(now_ms)
        deadline = now_ms + self.settings.record_lock_duration_ms
        taken: list[tuple[int, int]] = []
        for offset in range(self.start_offset, self.next_offset):
            if len(taken) >= max_records:
                break
            record = self.records[offset]
            if record.state == RecordState.AVAILABLE:
                taken.append((offset, self._lock(record, member_id, deadline)))
        while (len(taken) < max_records and self.next_offset < log_end
               and self.in_flight() < self.settings.max_record_locks):
            record = InFlightRecord()
            self.records[self.next_offset] = record
            taken.append((self.next_offset, self._lock(record, member_id, deadline)))
            self.next_offset += 1
        return _ranges(taken)

    def acknowledge(self, member_id: str, batches: Sequence[AckBatch], now_ms: int) -> None:
        """Apply a member's acknowledgements, all or none: raises AcknowledgeError (INVALID_RECORD_STATE for
        records not acquired by this member, INVALID_REQUEST for a malformed batch) and changes nothing."""
        self.expire(now_ms)
        for batch in batches:
            self._check(member_id, batch)
        for batch in batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                self._apply(offset, self.records[offset], AckType(batch.type_of(offset)), now_ms)
        self._advance()

    def archive_acquired(self, member_id: str, ranges: Iterable[tuple[int, int]]) -> bool:
        """Archive the offsets of these ranges the member has just acquired: records it must never get (of aborted
        transactions, transaction markers). Whether any was."""
        archived = False
        for first, last in ranges:
            for offset in range(first, last + 1):
                record = self.records.get(offset)
                if record is not None and record.state == RecordState.ACQUIRED and record.member_id == member_id:
                    record.state = RecordState.ARCHIVED
                    record.member_id = None
                    record.lock_deadline_ms = None
                    archived = True
        self._advance()
        return archived

    def expire(self, now_ms: int) -> bool:
        """Release every record whose acquisition lock has run out; whether there was one."""
        expired = [(o, r) for o, r in self.records.items() if r.state == RecordState.ACQUIRED
                   and r.lock_deadline_ms is not None and r.lock_deadline_ms <= now_ms]
        for offset, record in expired:
            self._release(record, offset)
        self._advance()
        return bool(expired)

    def release_member(self, member_id: str) -> bool:
        """The member left (or its share session ended): what it holds becomes available again; whether it held
        anything."""
        held = [(o, r) for o, r in self.records.items()
                if r.state == RecordState.ACQUIRED and r.member_id == member_id]
        for offset, record in held:
            self._release(record, offset)
        self._advance()
        return bool(held)

    def move_start(self, log_start: int) -> None:
        """The log no longer has offsets below `log_start` (retention, DeleteRecords): they are archived."""
        if log_start <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start, self.next_offset)):
            self.records[offset].state = RecordState.ARCHIVED
        self.next_offset = max(self.next_offset, log_start)
        for offset in range(self.start_offset, log_start):
            self.records.setdefault(offset, InFlightRecord(RecordState.ARCHIVED))
        self._advance()

    # -- internals -----------------------------------------------------------------------------------------

    @staticmethod
    def _lock(record: InFlightRecord, member_id: str, deadline_ms: int) -> int:
        record.state = RecordState.ACQUIRED
        record.delivery_count += 1
        record.member_id = member_id
        record.lock_deadline_ms = deadline_ms
        return record.delivery_count

    def _release(self, record: InFlightRecord, offset: int) -> None:
        limit_reached = record.delivery_count >= self.settings.delivery_count_limit
        record.state = RecordState.ARCHIVED if limit_reached else RecordState.AVAILABLE
        record.member_id = None
        record.lock_deadline_ms = None
        if limit_reached:
            self._note_archived(offset, record, ArchiveReason.DELIVERY_COUNT_EXCEEDED)

    def _note_archived(self, offset: int, record: InFlightRecord, reason: ArchiveReason) -> None:
        if self.settings.dead_letter:
            self.archived.append(ArchivedRecord(offset, record.delivery_count, reason))

    def take_archived(self) -> list[ArchivedRecord]:
        """The archived-record events since the last call, oldest first."""
        taken, self.archived = self.archived, []
        return taken

    def _check(self, member_id: str, batch: AckBatch) -> None:
        first, last = batch.first_offset, batch.last_offset
        if first > last or not batch.types:
            raise AcknowledgeError(ErrorCode.invalid_request, f"bad acknowledgement batch {first}-{last}")
        if len(batch.types) not in (1, last - first + 1):
            raise AcknowledgeError(ErrorCode.invalid_request,
                                   f"{len(batch.types)} acknowledge types for offsets {first}-{last}")
        if any(t not in AckType.__members__.values() for t in batch.types):
            raise AcknowledgeError(ErrorCode.invalid_request, f"unknown acknowledge type in {batch.types}")
        for offset in range(first, last + 1):
            record = self.records.get(offset)
            if record is None or record.state != RecordState.ACQUIRED or record.member_id != member_id:
                raise AcknowledgeError(ErrorCode.invalid_record_state,
                                       f"offset {offset} is not acquired by member {member_id}")

    def _apply(self, offset: int, record: InFlightRecord, ack: AckType, now_ms: int) -> None:
        if ack == AckType.RENEW:
            record.lock_deadline_ms = now_ms + self.settings.record_lock_duration_ms
            return
        if ack == AckType.RELEASE:
            self._release(record, offset)
            return
        # A gap is an offset with no record for the consumer (a control record, one compacted away): nothing to
        # deliver, so it is archived like a rejected record; only ACCEPT makes a record Acknowledged.
        record.state = RecordState.ACKNOWLEDGED if ack == AckType.ACCEPT else RecordState.ARCHIVED
        record.member_id = None
        record.lock_deadline_ms = None
        if ack == AckType.REJECT:
            self._note_archived(offset, record, ArchiveReason.REJECTED)

    def _advance(self) -> None:
        while self.start_offset < self.next_offset and self.records[self.start_offset].state in FINAL_STATES:
            del self.records[self.start_offset]
            self.start_offset += 1


def _ranges(taken: Iterable[tuple[int, int]]) -> list[AcquiredRange]:
    """Contiguous offsets with the same delivery count, as AcquiredRecords ranges."""
    out: list[AcquiredRange] = []
    for offset, count in taken:
        last = out[-1] if out else None
        if last is not None and last.last_offset + 1 == offset and last.delivery_count == count:
            out[-1] = AcquiredRange(last.first_offset, offset, count)
        else:
            out.append(AcquiredRange(offset, offset, count))
    return out
