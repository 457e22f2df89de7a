"""The bounds a node puts on what it waits for from other nodes (moldau.net.timeouts), and the connection
pool's setup timeout against real sockets on loopback: a peer whose accept queue is full never completes the TCP
handshake, so only the setup timeout ends the wait."""

from __future__ import annotations

import asyncio
import random
import socket
import time

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from moldau.config import BrokerConfig
from moldau.net.client import ConnectionPool, SetupFailed
from moldau.net.timeouts import ConnectionSetup, InterBrokerTimeouts
from tests.support.api_versions_server import answering_server


def test_the_setup_bound_doubles_per_failure_up_to_the_maximum_with_jitter() -> None:
    setup, rng = ConnectionSetup(10_000, 30_000), random.Random(7)
    for failures, (low, high) in {0: (8, 12), 1: (16, 24), 2: (24, 30), 3: (24, 30), 40: (24, 30)}.items():
        bounds = [setup.timeout_s(failures, rng) for _ in range(500)]
        assert low <= min(bounds) and max(bounds) <= high, (failures, min(bounds), max(bounds))
        assert max(bounds) - min(bounds) > (high - low) / 2  # jittered, not a fixed bound
    assert ConnectionSetup(10_000, 5_000).timeout_s(3, rng) == 10.0  # a maximum below the base leaves the base


def test_the_timeouts_come_from_kafkas_configs() -> None:
    config = BrokerConfig({"request.timeout.ms": "4000", "controller.socket.timeout.ms": "3000",
                           "socket.connection.setup.timeout.ms": "200",
                           "socket.connection.setup.timeout.max.ms": "800"})
    assert InterBrokerTimeouts.from_config(config) == InterBrokerTimeouts(4000, 3000, ConnectionSetup(200, 800))
    assert InterBrokerTimeouts.from_config(BrokerConfig({})) == InterBrokerTimeouts()


def _unanswering_peer() -> tuple[socket.socket, socket.socket, int]:
    """A listening socket whose accept queue is full: further connections hang in the TCP handshake."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port))
    return listener, filler, port


def test_a_peer_that_never_accepts_fails_at_the_setup_timeout_not_the_requests() -> None:
    asyncio.run(_never_accepts())


async def _never_accepts() -> None:
    listener, filler, port = _unanswering_peer()
    pool = ConnectionPool("test", setup=ConnectionSetup(200, 1_000), rng=random.Random(3))
    try:
        waits = []
        for failures in range(1, 4):
            started = time.monotonic()
            with pytest.raises(SetupFailed, match="not connected within"):
                await pool.request("127.0.0.1", port, ApiVersionsRequest(), 30.0)
            waits.append(time.monotonic() - started)
            assert pool.setup_failures("127.0.0.1", port) == failures
        # 0.2 s, then 0.4 s, then 0.8 s, each within 20 %: the request's own 30 s never came into it.
        assert 0.15 < waits[0] < 0.6 and 0.3 < waits[1] < 1.0 and 0.6 < waits[2] < 1.5, waits
        assert waits[0] < waits[2]
    finally:
        pool.close()
        filler.close()
        listener.close()


def test_a_connection_that_opens_resets_the_setup_bound() -> None:
    asyncio.run(_opens_after_failures())


async def _opens_after_failures() -> None:
    listener, filler, port = _unanswering_peer()
    pool = ConnectionPool("test", setup=ConnectionSetup(100, 10_000), rng=random.Random(3))
    try:
        for _ in range(2):
            with pytest.raises(SetupFailed):
                await pool.request("127.0.0.1", port, ApiVersionsRequest(), 30.0)
        assert pool.setup_failures("127.0.0.1", port) == 2
        filler.close()
        listener.close()
        server, _ = await answering_server(port)
        try:
            await pool.request("127.0.0.1", port, ApiVersionsRequest(), 10.0)
            assert pool.setup_failures("127.0.0.1", port) == 0
        finally:
            server.close()
            await server.wait_closed()
    finally:
        pool.close()
