"""A client of one group coordinator in a test: joins, syncs and commits as a consumer would, answers by handle.

Subclasses give the coordinator and the time (`now_ms`): over real partition logs (test_coordinator.py) or the
in-memory record log (test_group_memory_log.py).
"""

from __future__ import annotations

from moldau.coordinator.group.coordinator import GroupCoordinator
from moldau.coordinator.group.member import (
    Completion,
    JoinRequest,
    JoinResult,
    ProtocolMetadata,
    SyncRequest,
    SyncResult,
)
from moldau.coordinator.group.offsets import OffsetCommit
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import SESSION_MS, subscription


class GroupClient:
    coordinator: GroupCoordinator

    def __init__(self) -> None:
        self.answers: dict[int, JoinResult | SyncResult] = {}
        self._handle = 0

    def now_ms(self) -> int:
        raise NotImplementedError

    def _take(self, completions: list[Completion]) -> None:
        self.answers.update((c.handle, c.result) for c in completions)

    def join(self, group: str, member_id: str = "", instance: str | None = None) -> JoinResult:
        self._handle += 1
        request = JoinRequest(member_id, instance, "c", "/h", SESSION_MS, 30_000, "consumer",
                              (ProtocolMetadata("range", subscription("t")),))
        self._take(self.coordinator.join(group, self._handle, request, self.now_ms()))
        result = self.answers[self._handle]
        assert isinstance(result, JoinResult)
        return result

    def sync(self, group: str, member_id: str, generation: int, assignment: bytes) -> SyncResult:
        self._handle += 1
        request = SyncRequest(member_id, None, generation, None, None, ((member_id, assignment),))
        self._take(self.coordinator.sync(group, self._handle, request, self.now_ms()))
        result = self.answers[self._handle]
        assert isinstance(result, SyncResult)
        return result

    def member(self, group: str) -> tuple[str, int]:
        """A member of a stable group: joined twice (the first join only hands out the member id), synced."""
        member_id = self.join(group).member_id
        joined = self.join(group, member_id)
        assert joined.error == ErrorCode.none
        assert self.sync(group, member_id, joined.generation_id, b"assigned").error == ErrorCode.none
        return member_id, joined.generation_id

    def commit(self, group: str, member_id: str, generation: int, offset: int) -> list[ErrorCode]:
        return self.coordinator.commit_offsets(group, member_id, None, generation,
                                               [OffsetCommit("t", 0, offset, 1, "md")], 8, self.now_ms())
