"""A small client of the schema registry's REST API (Confluent's), for Moldau's own tools.

The standard library's `urllib` is enough for a command line tool that sends one request at a time, and it shows
the registry's answers as they are: error bodies (`{"error_code": 40401, "message": ...}`) become
`RegistryError`, and verbose compatibility messages are kept (confluent-kafka's `SchemaRegistryClient`, which the
serializers use, drops them).
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
DEFAULT_URL = "http://127.0.0.1:8081"
TIMEOUT_S = 30.0


class RegistryError(Exception):
    """The registry refused the request (`error_code` is Confluent's, e.g. 40401), or could not be reached
    (`error_code` 0)."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(f"{message} (HTTP {status}, error {error_code})" if status else message)
        self.status = status
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True, slots=True)
class RegistryAccess:
    """How a tool reaches the registry: its URL (credentials of HTTP Basic authentication may be in it, as
    `https://user:password@host:port`, which confluent-kafka's SchemaRegistryClient reads too) and the CA file
    that signs an https registry's certificate (None: the system's CAs)."""

    url: str = DEFAULT_URL
    ca_location: str | None = None

    def confluent_conf(self) -> dict[str, str]:
        """The config of confluent-kafka's SchemaRegistryClient."""
        return {"url": self.url} | ({"ssl.ca.location": self.ca_location} if self.ca_location else {})

    def client(self) -> RegistryClient:
        return RegistryClient(self.url, ca_location=self.ca_location)


class RegistryClient:
    def __init__(self, url: str = DEFAULT_URL, timeout_s: float = TIMEOUT_S, ca_location: str | None = None) -> None:
        parts = urllib.parse.urlsplit(url.rstrip("/"))
        self.authorization: str | None = None
        if parts.username is not None:
            user_info = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            self.authorization = "Basic " + base64.b64encode(user_info.encode()).decode()
            parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
        self.url = urllib.parse.urlunsplit(parts)
        self.timeout_s = timeout_s
        self.tls = ssl.create_default_context(cafile=ca_location) if ca_location else None

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, None, query)

    def post(self, path: str, body: Any, **query: Any) -> Any:
        return self.request("POST", path, body, query)

    def put(self, path: str, body: Any, **query: Any) -> Any:
        return self.request("PUT", path, body, query)

    def delete(self, path: str, **query: Any) -> Any:
        return self.request("DELETE", path, None, query)

    def request(self, method: str, path: str, body: Any, query: dict[str, Any]) -> Any:
        """Send one request; the decoded JSON answer. Raises RegistryError."""
        url = self.url + path
        params = {k: _query_value(v) for k, v in query.items() if v is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": CONTENT_TYPE}
        if data is not None:
            headers["Content-Type"] = CONTENT_TYPE
        if self.authorization is not None:
            headers["Authorization"] = self.authorization
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.tls) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise _registry_error(exc) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryError(0, 0, f"cannot reach the schema registry at {self.url}: {reason}") from None


def subject_path(subject: str, *rest: str) -> str:
    """`/subjects/<subject>/...` with the subject URL-encoded (subjects may hold `/`, `:` and spaces)."""
    return "/".join(("/subjects", urllib.parse.quote(subject, safe=""), *rest))


def resolve_references(registry: RegistryClient, references: list[dict[str, Any]]) -> dict[str, str]:
    """Every schema the references name, transitively: import name -> schema text."""
    texts: dict[str, str] = {}
    pending = list(references)
    while pending:
        ref = pending.pop()
        if ref["name"] in texts:
            continue
        version = registry.get(subject_path(ref["subject"], "versions", str(ref["version"])))
        texts[ref["name"]] = version["schema"]
        pending.extend(version.get("references") or [])
    return texts


def _query_value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _registry_error(exc: urllib.error.HTTPError) -> RegistryError:
    raw = exc.read()
    try:
        body = json.loads(raw)
        return RegistryError(exc.code, int(body.get("error_code", exc.code)), str(body.get("message", raw)))
    except (ValueError, AttributeError):
        return RegistryError(exc.code, exc.code, raw.decode(errors="replace").strip() or str(exc.reason))
