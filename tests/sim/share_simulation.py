"""A seeded simulation of one share-partition with several members (moldau.share.partition).

Producers append to the log, members acquire records and acknowledge them (ACCEPT, RELEASE, REJECT, RENEW) or
sit on them until their locks expire, members crash (their records released), time moves by random steps, and the
delivery limit, lock duration and window size are drawn per seed. A model of its own is kept beside the state
machine, and after every step the rules are checked:

- a record is never held by two members at once (while one's lock has not run out, nobody else gets it);
- each acquisition is one more delivery, and no record is delivered more than the delivery limit;
- the SPSO never goes back, and the window never exceeds the record-lock limit;
- an acknowledgement is accepted only from the member holding the record;
- with a dead-letter topic (half the seeds), each record given up on (rejected, or released after its last
  delivery) is announced once as an archived event with its reason and delivery count, and no other is; without
  one, there are no events.

At the end the members stop failing and drain the partition: every offset must then be Acknowledged (accepted
exactly once) or Archived (rejected, or its deliveries used up), and the SPSO must reach the log end.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from moldau.share.partition import (
    AckBatch,
    AcknowledgeError,
    AckType,
    ArchivedRecord,
    ArchiveReason,
    SharePartition,
    ShareSettings,
)


class InvariantViolation(AssertionError):
    pass


@dataclass
class Holding:
    member_id: str
    deadline_ms: int


@dataclass
class Model:
    """What the simulation itself saw happen to each offset."""

    deliveries: dict[int, int] = field(default_factory=dict)
    holder: dict[int, Holding] = field(default_factory=dict)
    accepted: dict[int, int] = field(default_factory=dict)
    rejected: set[int] = field(default_factory=set)
    dead_letters: dict[int, ArchivedRecord] = field(default_factory=dict)


class ShareSimulation:
    def __init__(self, seed: int, steps: int = 400) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.steps = steps
        self.settings = ShareSettings(
            record_lock_duration_ms=self.rng.choice([50, 200, 1000]),
            delivery_count_limit=self.rng.randint(1, 6),
            max_record_locks=self.rng.choice([3, 10, 50]),
            auto_offset_reset="earliest",
            dead_letter=self.rng.random() < 0.5,
        )
        self.now_ms = 0
        self.log_end = 0
        self.partition = SharePartition.initial(self.settings, 0, 0)
        self.members = [f"m{i}" for i in range(self.rng.randint(1, 5))]
        self.model = Model()
        self.last_start = 0

    # -- the run -------------------------------------------------------------------------------------------

    def run(self) -> None:
        for _ in range(self.steps):
            self.step()
            self.check()
        self.drain()
        self.check_final()

    def step(self) -> None:
        action = self.rng.random()
        member = self.rng.choice(self.members)
        if action < 0.2:
            self.log_end += self.rng.randint(1, 8)
        elif action < 0.5:
            self.acquire(member, self.rng.randint(1, 10))
        elif action < 0.8:
            self.acknowledge_some(member, self.rng.choice(list(AckType)[1:]))
        elif action < 0.9:
            self.now_ms += self.rng.randint(1, self.settings.record_lock_duration_ms)
        elif action < 0.95:
            self.crash(member)
        else:
            self.stray_acknowledgement(member)

    def drain(self) -> None:
        """Everyone accepts what it gets until the log is consumed."""
        for _ in range(10_000):
            if self.partition.start_offset >= self.log_end:
                return
            self.now_ms += self.settings.record_lock_duration_ms  # whatever is still locked expires
            for member in self.members:
                self.acquire(member, 50)
                self.acknowledge_some(member, AckType.ACCEPT, everything=True)
            self.check()
        raise InvariantViolation(f"seed={self.seed}: the partition never drained (SPSO "
                                 f"{self.partition.start_offset}, log end {self.log_end})")

    # -- actions -------------------------------------------------------------------------------------------

    def acquire(self, member: str, max_records: int) -> None:
        for got in self.partition.acquire(member, max_records, self.log_end, self.now_ms):
            for offset in range(got.first_offset, got.last_offset + 1):
                self.record_delivery(member, offset, got.delivery_count)

    def record_delivery(self, member: str, offset: int, delivery_count: int) -> None:
        model = self.model
        held = model.holder.get(offset)
        if held is not None and held.deadline_ms > self.now_ms:
            self.fail(f"offset {offset} acquired by {member} while held by {held.member_id} "
                      f"until {held.deadline_ms} (now {self.now_ms})")
        if offset in model.accepted or offset in model.rejected:
            self.fail(f"offset {offset} acquired by {member} after it was acknowledged")
        expected = model.deliveries.get(offset, 0) + 1
        if delivery_count != expected:
            self.fail(f"offset {offset} delivered with count {delivery_count}, expected {expected}")
        if delivery_count > self.settings.delivery_count_limit:
            self.fail(f"offset {offset} delivered {delivery_count} times, limit "
                      f"{self.settings.delivery_count_limit}")
        model.deliveries[offset] = delivery_count
        model.holder[offset] = Holding(member, self.now_ms + self.settings.record_lock_duration_ms)

    def held_by(self, member: str) -> list[int]:
        return sorted(o for o, h in self.model.holder.items() if h.member_id == member and h.deadline_ms > self.now_ms)

    def acknowledge_some(self, member: str, ack: AckType, everything: bool = False) -> None:
        held = self.held_by(member)
        if not held:
            return
        chosen = held if everything else held[:self.rng.randint(1, len(held))]
        batches = [AckBatch(o, o, (int(ack),)) for o in chosen]
        try:
            self.partition.acknowledge(member, batches, self.now_ms)
        except AcknowledgeError as exc:
            self.fail(f"{member} could not acknowledge offsets {chosen} it holds: {exc}")
        for offset in chosen:
            if ack == AckType.RENEW:
                self.model.holder[offset] = Holding(member, self.now_ms + self.settings.record_lock_duration_ms)
                continue
            del self.model.holder[offset]
            if ack == AckType.ACCEPT:
                self.model.accepted[offset] = self.model.accepted.get(offset, 0) + 1
            elif ack == AckType.REJECT:
                self.model.rejected.add(offset)

    def stray_acknowledgement(self, member: str) -> None:
        """Acknowledging an offset this member does not hold must be refused and change nothing."""
        if self.log_end == 0:
            return
        offset = self.rng.randrange(self.log_end)
        held = self.model.holder.get(offset)
        if held is not None and held.member_id == member and held.deadline_ms > self.now_ms:
            return
        try:
            self.partition.acknowledge(member, [AckBatch(offset, offset, (int(AckType.ACCEPT),))], self.now_ms)
        except AcknowledgeError:
            return
        self.fail(f"{member} acknowledged offset {offset} it does not hold")

    def crash(self, member: str) -> None:
        self.partition.release_member(member)
        for offset in [o for o, h in self.model.holder.items() if h.member_id == member]:
            del self.model.holder[offset]

    # -- checks --------------------------------------------------------------------------------------------

    def check(self) -> None:
        partition = self.partition
        self.check_dead_letters(partition.take_archived())
        if partition.start_offset < self.last_start:
            self.fail(f"SPSO went back from {self.last_start} to {partition.start_offset}")
        self.last_start = partition.start_offset
        if partition.in_flight() > self.settings.max_record_locks:
            self.fail(f"{partition.in_flight()} records in flight, limit {self.settings.max_record_locks}")
        for offset, count in self.model.accepted.items():
            if count > 1:
                self.fail(f"offset {offset} accepted {count} times")

    def check_dead_letters(self, events: list[ArchivedRecord]) -> None:
        model = self.model
        if events and not self.settings.dead_letter:
            self.fail(f"archived events {events} without a dead-letter topic")
        for event in events:
            if event.offset in model.dead_letters:
                self.fail(f"offset {event.offset} announced twice: {model.dead_letters[event.offset]}, {event}")
            model.dead_letters[event.offset] = event
            delivered = model.deliveries.get(event.offset, 0)
            if event.delivery_count != delivered:
                self.fail(f"{event} announced with {event.delivery_count} deliveries, model has {delivered}")
            rejected = event.offset in model.rejected
            if (event.reason == ArchiveReason.REJECTED) != rejected:
                self.fail(f"{event} announced, rejected: {rejected}")
            if not rejected and delivered < self.settings.delivery_count_limit:
                self.fail(f"{event} announced after {delivered} of {self.settings.delivery_count_limit} deliveries")

    def check_final(self) -> None:
        partition = self.partition
        if self.settings.dead_letter:
            limit = self.settings.delivery_count_limit
            given_up = {o for o in range(self.log_end) if o in self.model.rejected
                        or (o not in self.model.accepted and self.model.deliveries.get(o, 0) >= limit)}
            if set(self.model.dead_letters) != given_up:
                self.fail(f"dead letters {sorted(self.model.dead_letters)}, given up on {sorted(given_up)}")
        if partition.start_offset != self.log_end or partition.records:
            self.fail(f"SPSO {partition.start_offset} with {len(partition.records)} records in flight at the end, "
                      f"log end {self.log_end}")
        limit = self.settings.delivery_count_limit
        for offset in range(self.log_end):
            accepted = self.model.accepted.get(offset, 0)
            archived = offset in self.model.rejected or self.model.deliveries.get(offset, 0) >= limit
            if accepted == 1 and offset not in self.model.rejected:
                continue
            if accepted == 0 and archived:
                continue
            self.fail(f"offset {offset} ended accepted {accepted} times, rejected "
                      f"{offset in self.model.rejected}, delivered {self.model.deliveries.get(offset, 0)} times")

    def fail(self, message: str) -> None:
        raise InvariantViolation(f"seed={self.seed} t={self.now_ms}: {message}")
