"""The asyncio edge: waiting requests resolve when others complete them, and the timer acts on its own."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from moldau.clock import SystemClock
from moldau.coordinator.group.classic import GroupState
from moldau.coordinator.group.member import JoinRequest, ProtocolMetadata, SyncRequest
from moldau.coordinator.group.runtime import GroupRuntime
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import subscription
from tests.unit.coordinator.test_coordinator import Node


def join_request(member_id: str = "", session_ms: int = 1000) -> JoinRequest:
    return JoinRequest(member_id, None, "c", "/h", session_ms, 5000, "consumer",
                       (ProtocolMetadata("range", subscription("t")),))


def test_waiting_requests_and_timer(tmp_path: Path) -> None:
    node = Node(tmp_path, SystemClock())

    async def scenario() -> None:
        runtime = GroupRuntime(node.coordinator, SystemClock())
        runtime.start(node.controller.image)
        try:
            a = (await runtime.join("g", join_request())).member_id
            first = await runtime.join("g", join_request(a))
            assert first.generation_id == 1
            await runtime.sync("g", SyncRequest(a, None, 1, None, None, ((a, b"x"),)))
            b = (await runtime.join("g", join_request(session_ms=5000))).member_id
            b_join = asyncio.ensure_future(runtime.join("g", join_request(b, session_ms=5000)))
            await asyncio.sleep(0.05)
            assert not b_join.done(), "b waits for a to rejoin"
            assert runtime.heartbeat("g", a, None, 1) == ErrorCode.rebalance_in_progress
            a_join = await runtime.join("g", join_request(a))
            assert (await b_join).generation_id == a_join.generation_id == 2
            b_sync = asyncio.ensure_future(runtime.sync("g", SyncRequest(b, None, 2, None, None, ())))
            await asyncio.sleep(0.05)
            assert not b_sync.done(), "followers wait for the leader"
            await runtime.sync("g", SyncRequest(a, None, 2, None, None, ((a, b"A"), (b, b"B"))))
            assert (await b_sync).assignment == b"B"
            # a falls silent; only the timer can notice, after a's 1 s session.
            started = time.monotonic()
            group = node.coordinator.find_group("g")
            assert group is not None
            while a in group.members and time.monotonic() - started < 3:
                runtime.heartbeat("g", b, None, 2)
                await asyncio.sleep(0.02)
            assert a not in group.members and group.state == GroupState.PREPARING_REBALANCE
            assert 0.9 < time.monotonic() - started < 1.5
        finally:
            runtime.close()

    try:
        asyncio.run(scenario())
    finally:
        node.close()
