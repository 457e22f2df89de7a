"""replica.socket.receive.buffer.bytes on the client side of node-to-node connections, against real loopback
servers (plain and TLS): a size given is on the socket, fixed before it connects; none leaves the kernel's
autotuned buffer. Linux reports twice the size asked for (its bookkeeping share)."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path
from typing import Any

from kio.schema.api_versions.v0.request import ApiVersionsRequest

from moldau.config import BrokerConfig
from moldau.net.client import ClientConnection
from moldau.net.socket_buffers import OS_DEFAULT
from moldau.security.client_security import ClientSecurity
from tests.support.api_versions_server import answering_server
from tests.support.tls import make_pki

ASKED = 50_000  # not half the kernel's usual default (tcp_rmem: 131072), so the two cannot be confused


async def _receive_buffer_after_a_request(conn: ClientConnection) -> int:
    try:
        answer = await conn.request(ApiVersionsRequest(), 10.0)
        assert answer.error_code == 0
        transport: Any = conn._transport  # the connection's own socket: nothing else shows its options
        sock: socket.socket = transport.get_extra_info("socket")
        return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
    finally:
        conn.close()


def test_a_receive_buffer_given_is_fixed_on_the_socket_and_none_leaves_the_kernels() -> None:
    asyncio.run(_plain())


async def _plain() -> None:
    server, port = await answering_server()
    try:
        fixed = await _receive_buffer_after_a_request(
            ClientConnection("127.0.0.1", port, "test", receive_buffer_bytes=ASKED))
        assert fixed == 2 * ASKED
        autotuned = await _receive_buffer_after_a_request(ClientConnection("127.0.0.1", port, "test"))
        with socket.socket() as plain:
            assert autotuned != 2 * ASKED and autotuned >= plain.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    finally:
        server.close()
        await server.wait_closed()


def test_a_receive_buffer_given_keeps_tls_and_its_host_check(tmp_path: Path) -> None:
    asyncio.run(_tls(tmp_path))


async def _tls(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(str(pki.server))
    server, port = await answering_server(ssl_context=server_context)
    security = ClientSecurity("SSL", pki.client_context())
    try:
        fixed = await _receive_buffer_after_a_request(
            ClientConnection("127.0.0.1", port, "test", security, receive_buffer_bytes=ASKED))
        assert fixed == 2 * ASKED
    finally:
        server.close()
        await server.wait_closed()


def test_the_followers_receive_buffer_comes_from_kafkas_config() -> None:
    assert BrokerConfig({}).replica_socket_receive_buffer_bytes == OS_DEFAULT
    assert BrokerConfig({"replica.socket.receive.buffer.bytes": "65536"}).replica_socket_receive_buffer_bytes == 65_536
