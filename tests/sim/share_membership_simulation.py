"""A seeded simulation of share group membership written to `__consumer_offsets` across coordinator restarts
(moldau.share.manager with the records of moldau.server.share_group_records).

Members join, heartbeat at their epochs, leave, or go silent for good; time moves by random steps, the broker's
sweep removes silent members, and every change is written as the broker writes it (the members that changed, a
tombstone for each gone, the group's epoch) to a log that a coordinator restart replays into a fresh shard, so
the share manager takes the group back from it. The log goes through the binary record form, as on disk. Each
seed draws the session timeout and how often the coordinator restarts. After every step the rules are checked:

- a live member's heartbeat at its epoch is accepted, before and after any number of restarts: it never gets
  UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH, and its epoch never goes back;
- a member that left, or was removed for silence, is never in the group again;
- every member the group has is live, or was silent for less than the session timeout (since its last heartbeat
  or the restart that gave it a fresh session) when members were last expired (a heartbeat, or the sweep);
- a restart takes the group back at the epoch it had, with the members it had.

At the end every member falls silent: after the session timeout and a sweep, a restart finds the group empty.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from moldau.clock import ManualClock
from moldau.coordinator.group.records import (
    Record,
    ShareGroupKey,
    ShareGroupValue,
    ShareMemberValue,
    decode,
    encode,
)
from moldau.coordinator.group.shard import GroupShard, ShardSettings
from moldau.protocol.errors import ErrorCode
from moldau.server.share_group_records import member_records
from moldau.share.group import Heartbeat, MembershipSettings
from moldau.share.manager import ShareGroups
from moldau.share.settings import ShareBrokerSettings
from tests.unit.coordinator.harness import SequentialIds

GROUP = "queue"
TOPICS = ("jobs", "mail")


class InvariantViolation(AssertionError):
    pass


class WrittenShard:
    """The group coordinator's side: one loaded shard of `__consumer_offsets`, as the share manager reads it."""

    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard

    def share_group_epoch(self, group_id: str) -> int | None:
        written = self.shard.share_groups.get(group_id)
        return None if written is None else written.epoch

    def share_group_epochs(self) -> Mapping[str, int]:
        return {g: v.epoch for g, v in self.shard.share_groups.items()}

    def share_group_members(self, group_id: str) -> Mapping[str, ShareMemberValue]:
        return self.shard.share_members.get(group_id, {})

    def share_group_load(self, group_id: str) -> int | None:
        return self.shard.load_id


class MembershipSimulation:
    def __init__(self, seed: int, steps: int = 300) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.steps = steps
        self.clock = ManualClock()
        self.session_ms = self.rng.choice((3_000, 10_000, 45_000))
        self.restart_chance = self.rng.choice((0.02, 0.08, 0.2))
        self.settings = ShareBrokerSettings(MembershipSettings(1000, self.session_ms, max_size=50))
        self.log: list[tuple[bytes, bytes | None]] = []
        self.live: dict[str, int] = {}  # member -> the epoch it holds
        self.silent: dict[str, int] = {}  # member -> when its session was last renewed (heartbeat or restart)
        self.gone: set[str] = set()  # left, or removed for silence
        self.restarts = 0
        self.last_pass = int(self.clock.monotonic_ms())  # when members were last expired (a heartbeat or the sweep)
        self._next_member = 0
        self._start_coordinator()

    # -- the coordinator and its log ----------------------------------------------------------------------

    def _start_coordinator(self) -> None:
        shard = GroupShard(0, ShardSettings(), SequentialIds())
        for key, value in self.log:
            shard.replay(decode(key, value), 0)
        self.written = WrittenShard(shard)
        self.share = ShareGroups(self.settings, self.clock, None, durable=self.written)  # type: ignore[arg-type]

    def _write(self) -> None:
        """What the broker writes after a heartbeat or a sweep: the members changed or gone, the group's epoch."""
        group = self.share.describe(GROUP)
        if group is None:
            return
        records = member_records(group, self.written.share_group_members(GROUP))
        value = ShareGroupValue(group.epoch, tuple(sorted(group.subscribed_topics())))
        if self.written.shard.share_groups.get(GROUP) != value:
            records.append(Record(ShareGroupKey(GROUP), value))
        for record in records:
            self.log.append(encode(record))
            self.written.shard.replay(record, 0)

    def _restart(self) -> None:
        before = self.share.describe(GROUP)
        self._start_coordinator()
        self.restarts += 1
        after = self.share.describe(GROUP)
        if before is None:
            if after is not None:
                raise InvariantViolation(f"seed {self.seed}: a group nobody wrote came back")
            return
        if after is None or after.epoch != before.epoch or set(after.members) != set(before.members):
            raise InvariantViolation(f"seed {self.seed}: restart gave {after} for {before}")
        now = int(self.clock.monotonic_ms())
        for member in self.silent:
            if member in after.members:
                self.silent[member] = now  # a fresh session, as for everyone taken back

    # -- the members --------------------------------------------------------------------------------------

    def _beat(self, member: str, epoch: int, topics: tuple[str, ...] | None = None) -> int:
        answer = self.share.heartbeat(GROUP, Heartbeat(member, epoch, subscribed_topics=topics),
                                      lambda topic: 2 if topic in TOPICS else None)
        self.last_pass = int(self.clock.monotonic_ms())
        self._write()
        if epoch == -1:
            return -1
        if answer.error != ErrorCode.none:
            raise InvariantViolation(f"seed {self.seed}: {member} at epoch {epoch} got {answer.error.name}")
        if answer.member_epoch < epoch:
            raise InvariantViolation(f"seed {self.seed}: {member}'s epoch went back to {answer.member_epoch}")
        return answer.member_epoch

    def _join(self) -> None:
        member = f"m{self._next_member}"
        self._next_member += 1
        topics = tuple(self.rng.sample(TOPICS, self.rng.randint(1, len(TOPICS))))
        self.live[member] = self._beat(member, 0, topics)

    def _step(self) -> None:
        self.clock.advance(self.rng.randint(0, self.session_ms // 3))
        for member in self.rng.sample(sorted(self.live), len(self.live)):
            self.live[member] = self._beat(member, self.live[member])
        roll = self.rng.random()
        if roll < 0.25 and len(self.live) < 20:
            self._join()
        elif roll < 0.35 and self.live:
            member = self.rng.choice(sorted(self.live))
            self._beat(member, -1)
            del self.live[member]
            self.gone.add(member)
        elif roll < 0.45 and self.live:
            member = self.rng.choice(sorted(self.live))
            del self.live[member]
            self.silent[member] = int(self.clock.monotonic_ms())
        if self.rng.random() < 0.5:
            self._sweep()
        if self.rng.random() < self.restart_chance:
            self._restart()

    def _sweep(self) -> None:
        """The broker's sweep: expire silent members and write the groups that lost some."""
        self.share.expire_members(self.share.now_ms())
        self.last_pass = int(self.clock.monotonic_ms())
        if self.share.take_expired_in():
            self._write()

    def _check(self) -> None:
        group = self.share.describe(GROUP)
        members = set() if group is None else set(group.members)
        for member in members - set(self.live):
            if member in self.gone:
                raise InvariantViolation(f"seed {self.seed}: {member} is back after it was gone")
            if member not in self.silent or self.last_pass - self.silent[member] >= self.session_ms:
                raise InvariantViolation(f"seed {self.seed}: {member} outlived its session")
        missing = set(self.live) - members
        if missing:
            raise InvariantViolation(f"seed {self.seed}: live members {sorted(missing)} are not in the group")
        for member in [m for m in self.silent if m not in members]:
            self.gone.add(member)
            del self.silent[member]

    def run(self) -> None:
        self._join()
        for _ in range(self.steps):
            self._step()
            self._check()
        self.silent.update(dict.fromkeys(self.live, int(self.clock.monotonic_ms())))
        self.live.clear()
        self.clock.advance(self.session_ms + 1)
        self._sweep()
        self._start_coordinator()
        group = self.share.describe(GROUP)
        if group is None or group.members:
            raise InvariantViolation(f"seed {self.seed}: the group is not empty after everyone went: {group}")
