"""An asyncio Kafka client connection between nodes: requests out, responses matched by correlation id.

Nodes talk to each other in the Kafka protocol (Raft's Vote/Fetch, BrokerRegistration, forwarded admin requests),
encoded by kio like everything else. Requests are pipelined on one connection; a failed connection fails every
request waiting on it, and the pool opens a new one on the next request.
"""

from __future__ import annotations

import asyncio
import io
import logging
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kio.serial import entity_reader, entity_writer

from moldau.protocol import codec, tagged
from moldau.protocol.body_check import check_body
from moldau.protocol.fetch_request import EncodedRequest
from moldau.security.client_security import PLAINTEXT, ClientSecurity

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class ConnectionFailed(Exception):
    """The peer could not be reached, or the connection broke before the response came."""


# Authenticates a fresh connection (SASL, moldau.security.sasl.client) through the given round trip; returns the
# session lifetime in ms (0: none). Raises on refusal.
Authenticator = Callable[[Callable[[Any], Awaitable[Any]]], Awaitable[int]]
# Re-authenticate (KIP-368) once this share of the session lifetime has passed.
REAUTH_AT = 0.85


class ClientConnection:
    def __init__(self, host: str, port: int, client_id: str, security: ClientSecurity = PLAINTEXT,
                 authenticator: Authenticator | None = None) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.security = security
        self._authenticator = authenticator
        self._reauth_at: float | None = None  # monotonic seconds
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[asyncio.Future[bytes], int, int]] = {}
        self._next_id = 0
        self._read_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Lock = asyncio.Lock()
        self.closed = False

    async def request(self, request: Any, timeout_s: float, response_type: Any = None) -> Any:
        """Send a kio request entity and return the decoded response. Raises ConnectionFailed or TimeoutError.

        `response_type` decodes the response as another entity class laid out like kio's response (one that reads
        a field more leniently, say) instead of kio's own.
        """
        async with asyncio.timeout(timeout_s):
            await self._connect()
            return await self._round_trip(request, response_type)

    async def _round_trip(self, request: Any, response_type: Any = None) -> Any:
        if self._writer is None:
            raise ConnectionFailed(f"connection to {self.host}:{self.port} closed")
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        correlation_id = self._next_id
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (future, request.__api_key__, request.__version__)
        self._writer.write(self._encode(request, correlation_id))
        try:
            frame = await future
        finally:
            self._pending.pop(correlation_id, None)
        return _decode_response(frame, request.__api_key__, request.__version__, response_type)

    async def _connect(self) -> None:
        if self.closed:
            raise ConnectionFailed(f"connection to {self.host}:{self.port} is closed")
        async with self._connecting:
            if self._writer is not None:
                if self._reauth_at is not None and time.monotonic() >= self._reauth_at:
                    await self._authenticate()  # KIP-368 re-authentication, on the same connection
                return
            try:
                # TLS for SSL and SASL_SSL listeners; the peer's certificate is checked against `self.host`
                # unless ssl.endpoint.identification.algorithm is empty. SASL (`_authenticate`) follows.
                self._reader, self._writer = await asyncio.open_connection(
                    self.host, self.port, ssl=self.security.ssl_context)
            except (OSError, ssl.SSLError) as exc:
                raise ConnectionFailed(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
            if self.closed:
                # Closed while connecting (another request on it failed, and the pool dropped it): a socket
                # opened now would belong to nobody, and its read loop would be collected while still waiting.
                self._writer.close()
                self._reader = self._writer = None
                raise ConnectionFailed(f"connection to {self.host}:{self.port} was closed while connecting")
            self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
            await self._authenticate()

    async def _authenticate(self) -> None:
        if self._authenticator is None:
            return
        try:
            lifetime_ms = await self._authenticator(self._round_trip)
        except ConnectionFailed:
            raise
        except Exception as exc:
            self._fail_all(ConnectionFailed(f"authentication to {self.host}:{self.port} failed: {exc}"))
            raise ConnectionFailed(f"authentication to {self.host}:{self.port} failed: {exc}") from exc
        self._reauth_at = time.monotonic() + lifetime_ms * REAUTH_AT / 1000 if lifetime_ms > 0 else None

    def _encode(self, request: Any, correlation_id: int) -> bytes:
        cid = self.client_id.encode()
        header = struct.pack(">hhih", request.__api_key__, request.__version__, correlation_id, len(cid)) + cid
        if request.__flexible__:
            header += b"\x00"
        if isinstance(request, EncodedRequest):
            payload = header + request.body
        else:
            body = io.BytesIO()
            entity_writer(type(request))(body, request)
            payload = header + body.getvalue()
        return _SIZE.pack(len(payload)) + payload

    async def _read_loop(self) -> None:
        assert self._reader is not None
        error: Exception = ConnectionFailed(f"connection to {self.host}:{self.port} closed")
        try:
            while True:
                size = _SIZE.unpack(await self._reader.readexactly(4))[0]
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    raise ConnectionFailed(f"{self.host}:{self.port} sent a frame of {size} bytes")
                frame = await self._reader.readexactly(size)
                correlation_id = _SIZE.unpack_from(frame)[0]
                waiting = self._pending.get(correlation_id)
                if waiting is not None and not waiting[0].done():
                    waiting[0].set_result(frame)
        except (OSError, asyncio.IncompleteReadError, ConnectionFailed) as exc:
            error = exc if isinstance(exc, ConnectionFailed) else ConnectionFailed(
                f"connection to {self.host}:{self.port} failed: {exc}")
        finally:
            self._fail_all(error)

    def _fail_all(self, error: Exception) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
        for future, _, _ in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    def close(self) -> None:
        self.closed = True
        if self._read_task is not None:
            self._read_task.cancel()
        self._fail_all(ConnectionFailed(f"connection to {self.host}:{self.port} closed"))


def _decode_response(frame: bytes, api_key: int, version: int, response_type: Any = None) -> Any:
    schema = codec.api_schema(api_key, version)
    pos = 4 + (1 if schema.flexible_response_header else 0)
    entity_type = response_type or schema.response_type
    try:
        # A peer's response gets the same bounds check as a client's request: kio's native readers abort
        # the process on a huge declared length.
        check_body(entity_type, frame, pos)
        try:
            return entity_reader(entity_type)(frame[pos:], 0)[0]
        except KeyError:
            # A tagged field this entity does not declare (a newer peer): skipped, as the protocol requires.
            return entity_reader(entity_type)(tagged.strip_unknown_tagged_fields(entity_type, frame, pos), 0)[0]
    except Exception as exc:
        raise ConnectionFailed(f"undecodable {schema.response_type.__name__}: {exc}") from exc


class ConnectionPool:
    """One connection per peer address, reopened after a failure."""

    def __init__(self, client_id: str, security: ClientSecurity = PLAINTEXT,
                 authenticator: Authenticator | None = None) -> None:
        self.client_id = client_id
        self.security = security  # TLS for SSL and SASL_SSL listeners
        self.authenticator = authenticator  # SASL on every new connection (inter-broker listeners)
        self._connections: dict[tuple[str, int], ClientConnection] = {}

    async def request(self, host: str, port: int, request: Any, timeout_s: float, response_type: Any = None
                      ) -> Any:
        key = (host, port)
        conn = self._connections.get(key)
        if conn is None or conn.closed:
            conn = self._connections[key] = ClientConnection(host, port, self.client_id, self.security,
                                                             self.authenticator)
        try:
            return await conn.request(request, timeout_s, response_type)
        except (ConnectionFailed, TimeoutError):
            # A timed-out request may still be answered later; a fresh connection keeps the stream simple.
            conn.close()
            self._connections.pop(key, None)
            raise

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
