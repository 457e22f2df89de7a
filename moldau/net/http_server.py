"""One HTTP(S) listener of the broker's: an ASGI app served by uvicorn inside the broker's own event loop.

The schema registry and the console (with `/metrics`) each have one. The socket is bound up front, so a port
in use stops the broker at startup with the config named, and port 0 is resolved before anything is advertised;
uvicorn then serves on that socket, with its signal handlers off (the broker owns SIGTERM and SIGINT and stops
the server during its shutdown), its access log off, and the broker's TLS context when the URL is https.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Generator
from dataclasses import dataclass
from urllib.parse import urlsplit

import uvicorn
from starlette.types import ASGIApp

__all__ = ["HttpListener", "ListenerUrl", "parse_listener_url"]

SHUTDOWN_GRACE_S = 1


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
    """uvicorn without its signal handlers: the broker owns SIGTERM and SIGINT and stops the server itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class HttpListener:
    def __init__(self, what: str, url: ListenerUrl, tls: ssl.SSLContext | None = None) -> None:
        self.what = what
        self.url = url
        self.tls = tls
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
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                                timeout_graceful_shutdown=SHUTDOWN_GRACE_S, server_header=False)
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
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._task), SHUTDOWN_GRACE_S + 2)
            self._task.cancel()
        if self.socket is not None:
            self.socket.close()
