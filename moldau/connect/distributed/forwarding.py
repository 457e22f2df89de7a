"""Requests from one worker to another over the REST API: a follower forwards config changes to the leader,
an owner sends task configs to the leader, and restarts go to the worker running what is restarted. Every
forwarded request carries `forward=false`, so that it is never forwarded twice (Kafka Connect does the same).

Workers reach each other at the URLs they advertise in the group's metadata (`rest.advertised.listener`'s scheme,
host and port); https ones are verified with the worker's REST TLS settings (`listeners.https.ssl.*`, else its
`ssl.*`), whose key store, if any, is this worker's client certificate, as Kafka Connect's REST client does."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

__all__ = ["WorkerClient", "connector_path", "forward_url"]

TIMEOUT_S = 30.0


def connector_path(name: str, suffix: str = "") -> str:
    return "/connectors/" + quote(name, safe="") + suffix


def forward_url(base: str, path: str, query: str) -> str:
    return base.rstrip("/") + path + "?" + (query + "&" if query else "") + "forward=false"


class WorkerClient:
    """Calls to other workers' REST APIs, https ones with `tls` (None: this worker cannot call https workers)."""

    def __init__(self, tls: ssl.SSLContext | None) -> None:
        self.tls = tls

    def call(self, url: str, method: str, body: bytes | None, headers: Mapping[str, str] | None = None
             ) -> tuple[int, bytes]:
        """(HTTP status, body) of one request; a worker that cannot be reached is a 409 as Kafka answers it."""
        request = urllib.request.Request(url, data=body, method=method,
                                         headers={"Content-Type": "application/json", **(headers or {})})
        context = self.tls if url.startswith("https:") else None
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except OSError as exc:  # URLError and ssl.SSLError (a certificate not trusted) are OSErrors
            message = f"Cannot complete request because the worker at {url} could not be reached: {exc}"
            return 409, json.dumps({"error_code": 409, "message": message}).encode()

    def call_json(self, base: str, method: str, path: str, body: Any = None,
                  headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        return self.call(forward_url(base, path, ""), method, data, headers)
