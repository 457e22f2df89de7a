"""An asyncio Kafka client connection between nodes: requests out, responses matched by correlation id.

Nodes talk to each other in the Kafka protocol (Raft's Vote/Fetch, BrokerRegistration, forwarded admin requests),
encoded by kio like everything else. Requests are pipelined on one connection; a failed connection fails every
request waiting on it, and the pool opens a new one on the next request.

Responses are read as the broker reads requests (`moldau.protocol.framing.FrameReader`, through an
`asyncio.BufferedProtocol`): a large one, a follower's 1 MiB fetch say, goes from the socket straight into a
pooled buffer and is decoded from there, where a stream reader gathered it in a growing buffer and copied it out
twice more (a quarter of a follower's CPU at RF=3). A caller may pass a direct reader for its response: a
follower's Fetch answers are read by `moldau.protocol.fetch_response_reader`, whose records are views of that
buffer rather than copies.
"""

from __future__ import annotations

import asyncio
import io
import logging
import random
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from kio.serial import entity_reader, entity_writer

from moldau.net.socket_buffers import OS_DEFAULT, size_socket_buffers
from moldau.net.timeouts import ConnectionSetup
from moldau.protocol import codec, tagged
from moldau.protocol.body_check import check_body
from moldau.protocol.fetch_request import EncodedRequest
from moldau.protocol.framing import Frame, FrameReader, FrameTooLarge
from moldau.security.client_security import PLAINTEXT, ClientSecurity

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class ConnectionFailed(Exception):
    """The peer could not be reached, or the connection broke before the response came."""


class SetupFailed(ConnectionFailed):
    """The connection could not be opened: refused, unreachable, a failed TLS handshake, or not within its
    setup timeout (socket.connection.setup.timeout.ms)."""


# Authenticates a fresh connection (SASL, moldau.security.sasl.client) through the given round trip; returns the
# session lifetime in ms (0: none). Raises on refusal.
Authenticator = Callable[[Callable[[Any], Awaitable[Any]]], Awaitable[int]]
# Reads a response body straight from its frame (frame, position after the header, version), or returns None for a
# body it leaves to the generic path, which then decodes it with kio. Must not raise.
DirectReader = Callable[[Frame, int, int], Any]
# Re-authenticate (KIP-368) once this share of the session lifetime has passed.
REAUTH_AT = 0.85


class ClientConnection:
    def __init__(self, host: str, port: int, client_id: str, security: ClientSecurity = PLAINTEXT,
                 authenticator: Authenticator | None = None, setup_timeout_s: float | None = None,
                 receive_buffer_bytes: int = OS_DEFAULT) -> None:
        """`setup_timeout_s` bounds opening the connection (TCP and TLS handshakes), within the first request's
        own timeout; None leaves only that. `receive_buffer_bytes` fixes the socket's SO_RCVBUF before it connects
        (OS_DEFAULT: the kernel sizes it)."""
        self.host, self.port, self.client_id = host, port, client_id
        self.security = security
        self._authenticator = authenticator
        self._setup_timeout_s = setup_timeout_s
        self._receive_buffer_bytes = receive_buffer_bytes
        self._reauth_at: float | None = None  # monotonic seconds
        self._transport: asyncio.WriteTransport | None = None
        self._pending: dict[int, tuple[asyncio.Future[Frame], int, int]] = {}
        self._next_id = 0
        self._connecting: asyncio.Lock = asyncio.Lock()
        self.closed = False

    async def request(self, request: Any, timeout_s: float, response_type: Any = None,
                      direct_reader: DirectReader | None = None) -> Any:
        """Send a kio request entity and return the decoded response. Raises ConnectionFailed or TimeoutError.

        `response_type` decodes the response as another entity class laid out like kio's response (one that reads
        a field more leniently, say) instead of kio's own. `direct_reader` reads it first (a follower's Fetch
        response, whose records it leaves in the frame); what it leaves is decoded as usual.
        """
        async with asyncio.timeout(timeout_s):
            await self._connect()
            return await self._round_trip(request, response_type, direct_reader)

    async def _round_trip(self, request: Any, response_type: Any = None,
                          direct_reader: DirectReader | None = None) -> Any:
        if self._transport is None:
            raise ConnectionFailed(f"connection to {self.host}:{self.port} closed")
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        correlation_id = self._next_id
        future: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (future, request.__api_key__, request.__version__)
        self._transport.write(self._encode(request, correlation_id))
        try:
            frame = await future
        finally:
            self._pending.pop(correlation_id, None)
        return decode_response(frame, request.__api_key__, request.__version__, response_type, direct_reader)

    async def _connect(self) -> None:
        if self.closed:
            raise ConnectionFailed(f"connection to {self.host}:{self.port} is closed")
        async with self._connecting:
            if self._transport is not None:
                if self._reauth_at is not None and time.monotonic() >= self._reauth_at:
                    await self._authenticate()  # KIP-368 re-authentication, on the same connection
                return
            try:
                # TLS for SSL and SASL_SSL listeners; the peer's certificate is checked against `self.host`
                # unless ssl.endpoint.identification.algorithm is empty. SASL (`_authenticate`) follows.
                async with asyncio.timeout(self._setup_timeout_s):
                    transport = await self._open()
            except TimeoutError as exc:  # the setup's (an OSError too): the request's own arrives as a cancellation
                within = "" if self._setup_timeout_s is None else f" within {self._setup_timeout_s:.1f} s"
                raise SetupFailed(f"cannot connect to {self.host}:{self.port}: not connected{within}") from exc
            except (OSError, ssl.SSLError) as exc:
                raise SetupFailed(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
            if self.closed or transport.is_closing():
                # Closed while connecting (another request on it failed, and the pool dropped it): a socket
                # opened now would belong to nobody. Or the peer closed it at once, before it was ours to fail.
                transport.close()
                raise ConnectionFailed(f"connection to {self.host}:{self.port} was closed while connecting")
            # uvloop's transports are not subclasses of asyncio's, though they have the same methods.
            self._transport = cast(asyncio.WriteTransport, transport)
            await self._authenticate()

    async def _open(self) -> asyncio.BaseTransport:
        loop = asyncio.get_running_loop()
        ssl_context = self.security.ssl_context
        if self._receive_buffer_bytes == OS_DEFAULT:
            transport, _ = await loop.create_connection(lambda: _ResponseReader(self), self.host, self.port,
                                                        ssl=ssl_context)
            return transport
        # The receive buffer must be fixed before the handshake, which picks the TCP window scale from it.
        family, kind, proto, _, address = (await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM))[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            size_socket_buffers(sock, OS_DEFAULT, self._receive_buffer_bytes)
            await loop.sock_connect(sock, address)
            transport, _ = await loop.create_connection(
                lambda: _ResponseReader(self), sock=sock, ssl=ssl_context,
                server_hostname=self.host if ssl_context is not None else None)
        except BaseException:
            sock.close()
            raise
        return transport

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
        payload = encode_request(request, correlation_id, self.client_id)
        return _SIZE.pack(len(payload)) + payload

    def _answered(self, frame: Frame) -> bool:
        """A response arrived; False if it cannot be one (then the connection is failed)."""
        if len(frame) < 4:
            self._fail_all(ConnectionFailed(f"{self.host}:{self.port} sent a frame of {len(frame)} bytes"))
            return False
        waiting = self._pending.get(_SIZE.unpack_from(frame)[0])
        if waiting is not None and not waiting[0].done():
            waiting[0].set_result(frame)
        return True

    def _fail_all(self, error: Exception) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()
        for future, _, _ in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    def close(self) -> None:
        self.closed = True
        self._fail_all(ConnectionFailed(f"connection to {self.host}:{self.port} closed"))


class _ResponseReader(asyncio.BufferedProtocol):
    """Splits what a connection receives into response frames for its `ClientConnection`."""

    def __init__(self, connection: ClientConnection) -> None:
        self._connection = connection
        self._frames = FrameReader(MAX_RESPONSE_BYTES)
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        connection = self._connection
        try:
            frames = self._frames.buffer_updated(nbytes)
        except FrameTooLarge as exc:
            connection._fail_all(ConnectionFailed(f"{connection.host}:{connection.port} sent a frame of "
                                                  f"{exc.size} bytes"))
            return
        for frame in frames:
            if not connection._answered(frame):
                return

    def eof_received(self) -> bool | None:
        return False  # close the transport: connection_lost fails what is waiting

    def connection_lost(self, exc: Exception | None) -> None:
        self._frames.release()
        connection = self._connection
        if connection._transport is not self._transport:
            return  # already failed (and its requests with it); the connection may have a new transport by now
        reason = f"failed: {exc}" if exc is not None else "closed"
        connection._fail_all(ConnectionFailed(f"connection to {connection.host}:{connection.port} {reason}"))


def encode_request(request: Any, correlation_id: int, client_id: str) -> bytes:
    """A request frame (header and body, without the size prefix) of the request's own version."""
    cid = client_id.encode()
    header = struct.pack(">hhih", request.__api_key__, request.__version__, correlation_id, len(cid)) + cid
    if request.__flexible__:
        header += b"\x00"
    if isinstance(request, EncodedRequest):
        return header + request.body
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    return header + body.getvalue()


def decode_response(frame: Frame, api_key: int, version: int, response_type: Any = None,
                     direct_reader: DirectReader | None = None) -> Any:
    schema = codec.api_schema(api_key, version)
    pos = 4 + (1 if schema.flexible_response_header else 0)
    if direct_reader is not None:
        direct = direct_reader(frame, pos, version)
        if direct is not None:
            return direct
    entity_type = response_type or schema.response_type
    try:
        # A peer's response gets the same bounds check as a client's request: kio's native readers abort
        # the process on a huge declared length.
        check_body(entity_type, frame, pos)
        try:
            return entity_reader(entity_type)(frame, pos)[0]
        except KeyError:
            # A tagged field this entity does not declare (a newer peer): skipped, as the protocol requires.
            return entity_reader(entity_type)(tagged.strip_unknown_tagged_fields(entity_type, frame, pos), 0)[0]
    except Exception as exc:
        raise ConnectionFailed(f"undecodable {schema.response_type.__name__}: {exc}") from exc


class ConnectionPool:
    """One connection per peer address, reopened after a failure.

    Opening one is bounded by `setup` (socket.connection.setup.timeout.ms), which grows with each consecutive
    failure to open a connection to that address and is reset when one opens (`moldau.net.timeouts`).
    """

    def __init__(self, client_id: str, security: ClientSecurity = PLAINTEXT,
                 authenticator: Authenticator | None = None, setup: ConnectionSetup | None = None,
                 rng: random.Random | None = None, receive_buffer_bytes: int = OS_DEFAULT) -> None:
        """`receive_buffer_bytes`: every connection's SO_RCVBUF (OS_DEFAULT: the kernel sizes it)."""
        self.client_id = client_id
        self.security = security  # TLS for SSL and SASL_SSL listeners
        self.authenticator = authenticator  # SASL on every new connection (inter-broker listeners)
        self.setup = setup or ConnectionSetup()
        self._rng = rng or random.Random()
        self._connections: dict[tuple[str, int], ClientConnection] = {}
        self._setup_failures: dict[tuple[str, int], int] = {}  # consecutive, per address
        self._receive_buffer_bytes = receive_buffer_bytes

    async def request(self, host: str, port: int, request: Any, timeout_s: float, response_type: Any = None,
                      direct_reader: DirectReader | None = None) -> Any:
        key = (host, port)
        conn = self._connections.get(key)
        if conn is None or conn.closed:
            setup_s = self.setup.timeout_s(self._setup_failures.get(key, 0), self._rng)
            conn = self._connections[key] = ClientConnection(host, port, self.client_id, self.security,
                                                             self.authenticator, setup_s, self._receive_buffer_bytes)
        try:
            response = await conn.request(request, timeout_s, response_type, direct_reader)
        except SetupFailed:
            self._setup_failures[key] = self._setup_failures.get(key, 0) + 1
            self._drop(key, conn)
            raise
        except (ConnectionFailed, TimeoutError):
            # A timed-out request may still be answered later; a fresh connection keeps the stream simple.
            self._drop(key, conn)
            raise
        self._setup_failures.pop(key, None)
        return response

    def _drop(self, key: tuple[str, int], conn: ClientConnection) -> None:
        conn.close()
        if self._connections.get(key) is conn:
            del self._connections[key]

    def setup_failures(self, host: str, port: int) -> int:
        """Consecutive failures to open a connection to this address (for tests and diagnostics)."""
        return self._setup_failures.get((host, port), 0)

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
