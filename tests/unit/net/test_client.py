"""The inter-node client connection against a plain asyncio server on loopback."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from moldau.net.client import ClientConnection, ConnectionFailed, decode_response


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
        decode_response(frame, 20, 6)


async def _serve_answers(answer: bytes, chunk: int) -> tuple[asyncio.Server, int]:
    """A server answering every request with `answer` under the request's correlation id, written in pieces of
    `chunk` bytes."""

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                request = await reader.readexactly(size)
            except asyncio.IncompleteReadError:
                return
            correlation_id = request[4:8]
            frame = struct.pack(">i", len(answer) + 4) + correlation_id + answer
            for start in range(0, len(frame), chunk):
                writer.write(frame[start:start + chunk])
                await writer.drain()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _fetch_answer(records: bytes) -> bytes:
    """A Fetch v12 response body (after the correlation id) with one partition holding `records`."""
    import uuid

    from moldau.protocol.fetch_response import PartitionResult, TopicResult, encode_fetch_response

    parts = encode_fetch_response(12, 0, 0, 0, [TopicResult("t", uuid.UUID(int=0), [
        PartitionResult(0, 0, 10, 10, 0, None, -1, records)])])
    assert all(isinstance(part, bytes | memoryview) for part in parts)
    # b"\x00": the flexible response header's tag section, after the correlation id.
    return b"\x00" + b"".join(bytes(part) for part in parts if isinstance(part, bytes | memoryview))


def test_large_responses_in_pieces_and_back_to_back_are_decoded_whole() -> None:
    asyncio.run(_large_responses())


async def _large_responses() -> None:
    from kio.schema.fetch.v12.request import FetchRequest

    records = bytes(range(256)) * 4096  # 1 MiB: read into a frame buffer of its own
    server, port = await _serve_answers(_fetch_answer(records), chunk=100_003)
    try:
        conn = ClientConnection("127.0.0.1", port, "test")
        request = _empty_fetch(FetchRequest)
        answers = await asyncio.gather(*(conn.request(request, 10.0) for _ in range(4)))
        for answer in answers:
            assert answer.responses[0].partitions[0].records == records
        conn.close()
    finally:
        server.close()
        await server.wait_closed()


def _empty_fetch(request_type: Any) -> Any:
    import datetime

    return request_type(replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 30,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=(), forgotten_topics_data=(),
                        rack_id="")


def test_a_response_frame_over_the_limit_fails_the_waiting_request(monkeypatch: pytest.MonkeyPatch) -> None:
    import moldau.net.client as client

    monkeypatch.setattr(client, "MAX_RESPONSE_BYTES", 1000)
    asyncio.run(_over_the_limit())


async def _over_the_limit() -> None:
    server, port = await _serve_answers(b"\x00" * 5000, chunk=5000)
    try:
        conn = ClientConnection("127.0.0.1", port, "test")
        with pytest.raises(ConnectionFailed, match="sent a frame of 5004 bytes"):
            await conn.request(ApiVersionsRequest(), 5.0)
        # The connection is failed, not stuck: a new request opens a new socket.
        with pytest.raises(ConnectionFailed, match="sent a frame of 5004 bytes"):
            await conn.request(ApiVersionsRequest(), 5.0)
        conn.close()
    finally:
        server.close()
        await server.wait_closed()


def test_a_followers_fetch_answer_is_read_directly_with_records_left_in_the_frame() -> None:
    asyncio.run(_direct_fetch_answers())


async def _direct_fetch_answers() -> None:
    import uuid

    from moldau.net.client import ConnectionPool
    from moldau.protocol.fetch_request import encode_replica_fetch
    from moldau.protocol.fetch_response import PartitionResult, TopicResult, encode_fetch_response
    from moldau.protocol.fetch_response_reader import FetchResponse, read_fetch_response

    records = bytes(range(256)) * 4096  # 1 MiB: read into a pooled frame buffer of its own
    topic_id = uuid.uuid4()
    parts = encode_fetch_response(17, 0, 0, 9, [TopicResult(None, topic_id, [
        PartitionResult(0, 0, 10, 10, 0, None, -1, records, diverging_epoch=(3, 7))])])
    body = b"".join(bytes(part) for part in parts if isinstance(part, bytes | memoryview))
    server, port = await _serve_answers(b"\x00" + body, chunk=100_003)
    pool = ConnectionPool("test")
    try:
        request = encode_replica_fetch(1, 0, 1, 1 << 20, 1 << 20, [])
        answers = await asyncio.gather(*(pool.request("127.0.0.1", port, request, 10.0,
                                                      direct_reader=read_fetch_response) for _ in range(4)))
        for answer in answers:
            assert isinstance(answer, FetchResponse) and answer.session_id == 9
            (partition,) = answer.responses[0].partitions
            assert answer.responses[0].topic_id == topic_id
            assert isinstance(partition.records, memoryview) and partition.records == records
            assert (partition.diverging_epoch.epoch, partition.diverging_epoch.end_offset) == (3, 7)
        # Without the reader, the same answer is kio's, records copied.
        generic = await pool.request("127.0.0.1", port, request, 10.0)
        assert generic.responses[0].partitions[0].records == records
        assert not isinstance(generic, FetchResponse)
    finally:
        pool.close()
        server.close()
        await server.wait_closed()
