"""A minimal Kafka peer on loopback for tests of Moldau's own node-to-node client: it answers each ApiVersions v0
request with an empty answer under the request's correlation id, at once, after a delay, or never."""

from __future__ import annotations

import asyncio
import ssl
import struct


async def answering_server(port: int = 0, ssl_context: ssl.SSLContext | None = None,
                           answer_after_s: float | None = 0.0,
                           received: list[int] | None = None) -> tuple[asyncio.Server, int]:
    """The server and its port. `answer_after_s` None: read requests, never answer. `received` counts requests."""

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                request = await reader.readexactly(size)
                if received is not None:
                    received.append(1)
                if answer_after_s is None:
                    continue
                if answer_after_s:
                    await asyncio.sleep(answer_after_s)
                answer = request[4:8] + struct.pack(">hi", 0, 0)  # correlation id, no error, no API keys
                writer.write(struct.pack(">i", len(answer)) + answer)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", port, ssl=ssl_context, reuse_address=True)
    return server, server.sockets[0].getsockname()[1]
