"""A share-partition `StateStore` that calls a `ShareCoordinator` directly, as a broker coordinating the key itself
does: for the durable share-group unit tests and the seeded simulation."""

from __future__ import annotations

from moldau.coordinator.share.coordinator import ShareCoordinator
from moldau.coordinator.share.records import ShareSnapshot, StateKey
from moldau.protocol.errors import ErrorCode


class DirectStateStore:
    def __init__(self, coordinator: ShareCoordinator) -> None:
        self.coordinator = coordinator

    async def read(self, key: StateKey, leader_epoch: int) -> ShareSnapshot | None:
        return self.coordinator.read(key, leader_epoch)

    async def write(self, key: StateKey, snapshot: ShareSnapshot) -> ErrorCode:
        return await self.coordinator.write(key, snapshot, 0)

    async def initialize(self, key: StateKey, start_offset: int) -> ErrorCode:
        return await self.coordinator.initialize(key, 0, start_offset, 0)

    async def delete(self, key: StateKey) -> ErrorCode:
        return await self.coordinator.delete(key, 0)
