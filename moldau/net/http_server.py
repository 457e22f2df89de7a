"""One HTTP(S) listener of the broker's: an ASGI app served by uvicorn inside the broker's own event loop.

The schema registry and the console (with `/metrics`) each have one. The socket is bound up front, so a port
in use stops the broker at startup with the config named, and port 0 is resolved before anything is advertised;
uvicorn then serves on that socket, with its signal handlers off (the broker owns SIGTERM and SIGINT and stops
the server during its shutdown), its access log off, and the broker's TLS context when the URL is https.

Limits (`HttpLimits`) keep a hostile client from holding the listener or the broker's memory: connections beyond
`max_connections` are answered 503 and closed as they arrive; a connection that has not sent a whole request head
(request line and headers) within `request_header_timeout_s` of connecting, or of its previous response, is
answered 408 and closed (uvicorn times out only idle connections between requests, so a slow sender of headers,
or a client that never sends a byte, would otherwise hold its connection for ever); a body larger than
`max_request_bytes` is refused with 413 as soon as it declares or shows its size; request headers over 16 KiB
get 400 (h11, while they arrive) or 431.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
from collections.abc import Generator
from dataclasses import dataclass
from urllib.parse import urlsplit

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HttpLimits", "HttpListener", "ListenerUrl", "parse_listener_url"]

SHUTDOWN_GRACE_S = 1
# h11 refuses (400) a request head still incomplete at this size; one that arrives whole in a single read can be
# larger, so the same bound is checked again on the parsed headers (431).
MAX_HEADER_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class HttpLimits:
    max_connections: int = 1000
    request_header_timeout_s: float = 10.0
    max_request_bytes: int = 16 * 1024 * 1024


def _plain_answer(status: int, reason: str, text: str) -> bytes:
    body = text.encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


def _guarded_protocol(limits: HttpLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the connection limit and the request-head timeout."""

    class GuardedProtocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                transport.write(_plain_answer(503, "Service Unavailable", "too many connections\n"))
                transport.close()
                return
            self._arm_head_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_head_timer()  # the next request's head has the same time to arrive

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            super().connection_lost(exc)

        def _arm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(limits.request_header_timeout_s, self._head_timed_out)

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
                return  # closed already, or a request is being served: its head arrived in time
            self.transport.write(_plain_answer(408, "Request Timeout", "no complete request in time\n"))
            self.transport.close()

    return GuardedProtocol


def _bounded_bodies(app: ASGIApp, limit: int) -> ASGIApp:
    """`app`, with request bodies over `limit` bytes answered 413 (by Content-Length, or as they stream in, in
    which case the app sees the client disconnect and whatever it answers is replaced by the 413)."""

    async def bounded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if sum(len(name) + len(value) for name, value in scope["headers"]) > MAX_HEADER_BYTES:
            await _refuse(send, 431, f"the request headers are larger than {MAX_HEADER_BYTES} bytes")
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await _refuse(send, 413, f"the request body is larger than {limit} bytes")
            return
        received, exceeded, started = 0, False, False

        async def bounded_receive() -> Message:
            nonlocal received, exceeded
            if exceeded:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    exceeded = True
                    return {"type": "http.disconnect"}
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if exceeded and not started:
                return  # the 413 below answers instead
            started = started or message["type"] == "http.response.start"
            await send(message)

        await app(scope, bounded_receive, tracked_send)
        if exceeded and not started:
            await _refuse(send, 413, f"the request body is larger than {limit} bytes")

    return bounded


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error_code": status, "message": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


@dataclass(frozen=True, slots=True)
class ListenerUrl:
    host: str
    port: int
    tls: bool = False

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"


def parse_listener_url(config_name: str, url: str) -> ListenerUrl | None:
    """The listener `http://host:port` or `https://host:port` names; None for an empty string. Raises ValueError
    naming `config_name`."""
    if not url.strip():
        return None
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or parts.port is None or parts.path not in ("", "/"):
        raise ValueError(f"{config_name} must be http://host:port, https://host:port or empty, not {url!r}")
    return ListenerUrl(parts.hostname or "", parts.port, parts.scheme == "https")


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers (the broker owns SIGTERM and SIGINT and stops the server itself), and
    without its ten wake-ups a second: uvicorn polls for the order to stop every 0.1 s, which a mostly idle broker
    pays for ever and every stop waits for; here the order wakes the loop, which otherwise ticks once a second to
    renew the Date header as uvicorn's does."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._exit_ordered = asyncio.Event()

    def order_exit(self) -> None:
        self.should_exit = True
        self._exit_ordered.set()

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit_ordered.wait(), 1.0)
            counter += 10  # uvicorn counts tenths of a second: every tick renews the Date header

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.server_state.connections or self.server_state.tasks:
            await super().shutdown(sockets)  # tells each connection, then gives them a tenth of a second and more
            return
        # Nobody to wait for: uvicorn would still sleep its tenth of a second, paid by every stop of the broker.
        for server in self.servers:
            server.close()
        for server in self.servers:
            await server.wait_closed()
        await self.lifespan.shutdown()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class HttpListener:
    def __init__(self, what: str, url: ListenerUrl, tls: ssl.SSLContext | None = None,
                 limits: HttpLimits = HttpLimits(), shutdown_grace_s: int = SHUTDOWN_GRACE_S) -> None:
        self.what = what
        self.url = url
        self.tls = tls
        self.limits = limits
        self.shutdown_grace_s = shutdown_grace_s
        self.socket: socket.socket | None = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    def bind(self) -> None:
        """Bind and listen (before the broker registers, so the port is known). Raises OSError."""
        host = self.url.host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host or ("::" if family == socket.AF_INET6 else "0.0.0.0"), self.url.port))
            sock.listen(256)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self.socket = sock

    @property
    def port(self) -> int:
        assert self.socket is not None, "bind() first"
        return int(self.socket.getsockname()[1])

    def start(self, app: ASGIApp) -> None:
        """Serve `app` on the bound socket, as a task of the running loop."""
        assert self.socket is not None, "bind() first"
        config = uvicorn.Config(_bounded_bodies(app, self.limits.max_request_bytes), log_config=None,
                                access_log=False, lifespan="off", timeout_graceful_shutdown=self.shutdown_grace_s,
                                server_header=False, http=_guarded_protocol(self.limits))
        # uvicorn builds its own TLS context from file names; the broker's (PEM stores, inline certificates,
        # cipher and protocol settings) is set once the config is loaded, which serve() then uses as it is.
        config.load()
        config.ssl = self.tls
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)  # its start/stop lines repeat ours
        self._server = _Server(config)
        self._task = asyncio.get_running_loop().create_task(self._server.serve(sockets=[self.socket]))
        logging.getLogger(__name__).info("%s listening on %s://%s:%d", self.what, self.url.scheme,
                                         *self.socket.getsockname()[:2])

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.order_exit()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._task), self.shutdown_grace_s + 2)
            self._task.cancel()
        if self.socket is not None:
            self.socket.close()
