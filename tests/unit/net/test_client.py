"""The inter-node client connection against a plain asyncio server on loopback."""

from __future__ import annotations

import asyncio
import struct

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from moldau.net.client import ClientConnection, ConnectionFailed, _decode_response


def test_a_connection_closed_while_connecting_leaves_no_socket_behind() -> None:
    asyncio.run(_closed_while_connecting())


async def _closed_while_connecting() -> None:
    accepted: list[asyncio.StreamReader] = []

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(reader)

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        conn = ClientConnection("127.0.0.1", port, "test")
        request = asyncio.create_task(conn.request(ApiVersionsRequest(), 5.0))
        await asyncio.sleep(0)  # the request is now opening the socket
        conn.close()  # as the pool does when another request on this connection fails
        with pytest.raises(ConnectionFailed, match="closed while connecting"):
            await request
        async with asyncio.timeout(5):
            while not accepted:
                await asyncio.sleep(0.01)
            assert await accepted[0].read() == b""  # the server sees the socket closed, nothing sent on it
    finally:
        server.close()
        await server.wait_closed()


def test_a_response_declaring_a_huge_array_is_refused_before_decoding() -> None:
    # DeleteTopics v6 response: correlation id, header tags, throttle time, then a compact array of 2**34.
    frame = struct.pack(">i", 1) + b"\x00" + struct.pack(">i", 0) + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(ConnectionFailed, match="runs past the end of the frame"):
        _decode_response(frame, 20, 6)
