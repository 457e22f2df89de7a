"""The REST API served on every listener of `listeners`, one uvicorn server per listener (an https one with the
context of `listeners.https.ssl.*` or the worker's `ssl.*`), as the schema registry and the console serve theirs;
and the `/admin` endpoints on those of `admin.listeners` instead, when it is set (`admin.listeners.https.ssl.*`).

Every socket is bound, and the TLS context built, before the worker starts anything, so a port in use or a bad
TLS setting stops the worker at once with a message naming the config."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.types import ASGIApp

from moldau.connect.errors import ConnectException
from moldau.connect.worker.rest_listeners import RestTls
from moldau.connect.worker.worker_config import WorkerConfig
from moldau.net.http_server import HttpListener, ListenerUrl

__all__ = ["RestServing"]

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 5


class RestServing:
    def __init__(self, worker: WorkerConfig) -> None:
        """Raises ConfigException naming a bad listener or TLS setting."""
        self.api_listeners = _listeners("connect REST API", worker.rest_listeners(), worker.rest_tls())
        admin = worker.admin_listeners()
        # Kafka Connect's rule: without admin.listeners the /admin endpoints are served with the rest.
        self.admin_on_api_listeners = admin is None
        self.admin_listeners = _listeners("connect admin REST API", admin or (), worker.admin_rest_tls())
        self.listeners = [*self.api_listeners, *self.admin_listeners]

    def bind(self) -> None:
        """Bind every listener's socket. Raises ConnectException naming the listener that cannot listen."""
        for listener in self.listeners:
            try:
                listener.bind()
            except OSError as exc:
                self.close()
                url = listener.url
                what = "the admin REST API (admin.listeners)" if listener in self.admin_listeners else "the REST API"
                raise ConnectException(f"{what} cannot listen on {url.scheme}://{url.host}:{url.port}: "
                                       f"{exc.strerror or exc}") from None

    def start(self, app: ASGIApp, admin_app: ASGIApp) -> None:
        """Serve `app` on the listeners of `listeners`, `admin_app` (the /admin endpoints) on those of
        `admin.listeners`."""
        for listener in self.api_listeners:
            listener.start(app)
        for listener in self.admin_listeners:
            listener.start(admin_app)

    def close(self) -> None:
        """Close the sockets of a worker that did not start serving."""
        for listener in self.listeners:
            if listener.socket is not None:
                listener.socket.close()

    async def stop(self) -> None:
        for listener in self.listeners:
            await listener.stop()


def _listeners(name: str, urls: Sequence[ListenerUrl], tls: RestTls) -> list[HttpListener]:
    server_tls = tls.server_context() if any(url.tls for url in urls) else None
    return [HttpListener(name, url, server_tls if url.tls else None, shutdown_grace_s=SHUTDOWN_GRACE_S)
            for url in urls]
