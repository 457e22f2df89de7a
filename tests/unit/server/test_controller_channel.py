"""The channel to the active controller against real sockets on loopback: each attempt is bounded by
controller.socket.timeout.ms and ends when leadership leaves the node it waits on. The quorum is a small
stand-in that says who leads and announces moves, as MetadataQuorum does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, cast

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from moldau.config import Voter
from moldau.metadata.quorum import MetadataQuorum
from moldau.net.timeouts import InterBrokerTimeouts
from moldau.server.controller_channel import ControllerChannel, ControllerUnavailable
from tests.support.api_versions_server import answering_server

THIS_NODE = 1


class _Leadership:
    """Who leads the quorum, as this node sees it, and the listeners MetadataQuorum calls when that changes."""

    node_id = THIS_NODE

    def __init__(self, leader: Voter) -> None:
        self.leader = leader
        self._listeners: list[Callable[[], None]] = []

    @property
    def leader_id(self) -> int:
        return self.leader.node_id

    def leader_address(self) -> Voter:
        return self.leader

    def is_active_controller(self) -> bool:
        return self.leader.node_id == THIS_NODE

    def add_leadership_listener(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def move(self, leader: Voter) -> None:
        self.leader = leader
        for listener in self._listeners:
            listener()


async def _controller(answer_after_s: float | None) -> tuple[asyncio.Server, int, list[int]]:
    """A controller answering each request after `answer_after_s`, or never; the list counts the requests."""
    received: list[int] = []
    server, port = await answering_server(answer_after_s=answer_after_s, received=received)
    return server, port, received


def _channel(leadership: _Leadership, attempt_ms: int) -> ControllerChannel:
    return ControllerChannel(cast(MetadataQuorum, leadership), "test",
                             timeouts=InterBrokerTimeouts(controller_socket_timeout_ms=attempt_ms))


async def _served_here(request: Any) -> str:
    return "served by this node"


def test_leadership_moving_ends_the_attempt_waiting_on_the_old_controller() -> None:
    asyncio.run(_leadership_moves())


async def _leadership_moves() -> None:
    server, port, _ = await _controller(answer_after_s=None)
    leadership = _Leadership(Voter(2, "127.0.0.1", port))
    channel = _channel(leadership, attempt_ms=30_000)
    try:
        started = time.monotonic()
        call = asyncio.create_task(channel.call(ApiVersionsRequest(), _served_here, timeout_s=20))
        await asyncio.sleep(0.3)
        assert not call.done()
        leadership.move(Voter(THIS_NODE, "127.0.0.1", 1))
        assert await asyncio.wait_for(call, 5) == "served by this node"
        assert time.monotonic() - started < 3  # not the 30 s attempt, nor the 20 s call
    finally:
        channel.close()
        server.close()
        await server.wait_closed()


def test_an_attempt_ends_at_the_controller_socket_timeout_and_the_call_tries_again() -> None:
    asyncio.run(_attempts_time_out())


async def _attempts_time_out() -> None:
    server, port, received = await _controller(answer_after_s=None)
    channel = _channel(_Leadership(Voter(2, "127.0.0.1", port)), attempt_ms=400)
    try:
        started = time.monotonic()
        with pytest.raises(ControllerUnavailable, match=r"within 2\.0 s"):
            await channel.call(ApiVersionsRequest(), None, timeout_s=2.0)
        assert 1.9 < time.monotonic() - started < 4
        assert len(received) >= 3  # about five attempts of 0.4 s in 2 s
    finally:
        channel.close()
        server.close()
        await server.wait_closed()


def test_a_new_term_with_the_same_leader_keeps_the_attempt() -> None:
    asyncio.run(_same_leader())


async def _same_leader() -> None:
    server, port, received = await _controller(answer_after_s=0.5)
    controller = Voter(2, "127.0.0.1", port)
    leadership = _Leadership(controller)
    channel = _channel(leadership, attempt_ms=30_000)
    try:
        call = asyncio.create_task(channel.call(ApiVersionsRequest(), None, timeout_s=10))
        await asyncio.sleep(0.2)
        leadership.move(controller)  # a new term, the same leader
        answer = await asyncio.wait_for(call, 5)
        assert answer.error_code == 0 and len(received) == 1  # answered, not asked again
    finally:
        channel.close()
        server.close()
        await server.wait_closed()
