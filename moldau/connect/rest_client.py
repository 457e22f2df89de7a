"""A small client of a Connect worker's REST API (Kafka Connect's), for `moldau connect`: one request at a
time with the standard library; error bodies (`{"error_code": 404, "message": ...}`) become `ConnectApiError`.
An https worker is verified against the system's CAs or a given CA file, and a client certificate is offered
when one is given (for workers with `ssl.client.auth=required`)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["DEFAULT_URL", "ConnectApiError", "ConnectClient", "tls_context"]

DEFAULT_URL = "http://127.0.0.1:8083"
TIMEOUT_S = 60.0


class ConnectApiError(Exception):
    """The worker refused the request (status is its HTTP status), or could not be reached (status 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{message} (HTTP {status})" if status else message)
        self.status = status
        self.message = message


class ConnectClient:
    def __init__(self, url: str = DEFAULT_URL, timeout_s: float = TIMEOUT_S, tls: ssl.SSLContext | None = None) -> None:
        """`tls`: the context of https requests (None: Python's default, the system's CAs)."""
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.tls = tls

    def request(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        """Send one request; the decoded JSON answer (None for an empty one). Raises ConnectApiError."""
        url = self.url + path
        params = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in query.items() if v is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.tls) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise _error(exc.code, exc.read()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ConnectApiError(0, f"cannot reach the Connect worker at {self.url}: {reason}") from None
        return json.loads(raw) if raw.strip() else None


def tls_context(cafile: str | None, certfile: str | None, keyfile: str | None) -> ssl.SSLContext | None:
    """The context for https workers: trusting `cafile` (else the system's CAs), offering the PEM certificate
    `certfile` (its key in it, or in `keyfile`). None when nothing is given. Raises ConnectApiError naming the
    file that cannot be used."""
    if cafile is None and certfile is None:
        if keyfile is not None:
            raise ConnectApiError(0, "a client key needs its certificate (--cert)")
        return None
    try:
        context = ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConnectApiError(0, f"cannot use the CA file {cafile}: {exc}") from None
    if certfile is not None:
        try:
            context.load_cert_chain(certfile, keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise ConnectApiError(0, f"cannot use the client certificate {certfile}: {exc}") from None
    return context


def _error(status: int, raw: bytes) -> ConnectApiError:
    try:
        body = json.loads(raw)
        message = str(body.get("message", raw.decode(errors="replace")))
    except (ValueError, AttributeError):
        message = raw.decode(errors="replace") or f"HTTP {status}"
    return ConnectApiError(status, message)
