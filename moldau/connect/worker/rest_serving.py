"""The REST API served on every listener of `listeners`, one uvicorn server per listener (an https one with the
context of `listeners.https.ssl.*` or the worker's `ssl.*`), as the schema registry and the console serve theirs.

Every socket is bound, and the TLS context built, before the worker starts anything, so a port in use or a bad
TLS setting stops the worker at once with a message naming the config."""

from __future__ import annotations

import logging

from starlette.types import ASGIApp

from moldau.connect.errors import ConnectException
from moldau.connect.worker.worker_config import WorkerConfig
from moldau.net.http_server import HttpListener

__all__ = ["RestServing"]

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 5


class RestServing:
    def __init__(self, worker: WorkerConfig) -> None:
        """Raises ConfigException naming a bad listener or TLS setting."""
        listeners = worker.rest_listeners()
        server_tls = worker.rest_tls().server_context() if any(url.tls for url in listeners) else None
        self.listeners = [HttpListener("connect REST API", url, server_tls if url.tls else None,
                                       shutdown_grace_s=SHUTDOWN_GRACE_S) for url in listeners]

    def bind(self) -> None:
        """Bind every listener's socket. Raises ConnectException naming the listener that cannot listen."""
        for listener in self.listeners:
            try:
                listener.bind()
            except OSError as exc:
                self.close()
                url = listener.url
                raise ConnectException(f"the REST API cannot listen on {url.scheme}://{url.host}:{url.port}: "
                                       f"{exc.strerror or exc}") from None

    def start(self, app: ASGIApp) -> None:
        for listener in self.listeners:
            listener.start(app)

    def close(self) -> None:
        """Close the sockets of a worker that did not start serving."""
        for listener in self.listeners:
            if listener.socket is not None:
                listener.socket.close()

    async def stop(self) -> None:
        for listener in self.listeners:
            await listener.stop()
