"""An in-memory store for the registry's pure layers, and a way to call its ASGI app without a server.

The store applies a plan's records through the same encode -> `RegistryState.apply` path the broker's replay
uses, so the REST layer and the state machine are tested together without a broker.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from moldau.registry.core import RegistryCore
from moldau.registry.operations import Plan
from moldau.registry.records import encode
from moldau.registry.state import RegistryState


class MemoryStore:
    def __init__(self, core: RegistryCore) -> None:
        self.core = core
        self.log: list[tuple[bytes, bytes | None]] = []

    async def write(self, plan: Callable[[], Plan]) -> Any:
        planned = plan()
        for key, value in planned.records:
            raw_key = encode(key)
            assert raw_key is not None
            raw_value = encode(value)
            self.log.append((raw_key, raw_value))
            self.core.state.apply(raw_key, raw_value, len(self.log) - 1)
        return planned.answer

    async def catch_up(self, timeout_s: float) -> None:
        return None

    def replayed(self) -> RegistryState:
        """A fresh state replayed from the log, as a restarted broker would build it."""
        state = RegistryState()
        for offset, (key, value) in enumerate(self.log):
            state.apply(key, value, offset)
        return state


def call(app: Any, method: str, path: str, body: object = None, raw: bytes | None = None,
         **query: object) -> tuple[int, Any, str]:
    """One request to the ASGI app: (status, decoded JSON body or text, content type)."""
    payload = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": urlencode({k: str(v).lower() if isinstance(v, bool) else v
                                        for k, v in query.items()}).encode(),
             "headers": [(b"content-type", b"application/vnd.schemaregistry.v1+json")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8081)}
    sent: list[dict[str, Any]] = []
    received = False

    async def receive() -> dict[str, Any]:
        nonlocal received
        if received:
            return {"type": "http.disconnect"}
        received = True
        return {"type": "http.request", "body": payload, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    try:
        decoded: Any = json.loads(content)
    except ValueError:
        decoded = content.decode()
    return start["status"], decoded, headers.get("content-type", "")
