"""The console's client of Kafka Connect's REST API (`console.connect.urls`): connectors with their state and
tasks (`GET /connectors?expand=status&expand=info`), and pause, resume and restart. Blocking HTTP (urllib) run
in a thread, so the broker's event loop never waits on a worker."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

__all__ = ["ACTIONS", "ConnectError", "ConnectorRow", "TaskRow", "connector_action", "list_connectors"]

TIMEOUT_S = 10.0
# The console's buttons -> Connect's endpoints (method, path after /connectors/<name>).
ACTIONS = {"pause": ("PUT", "/pause"), "resume": ("PUT", "/resume"),
           "restart": ("POST", "/restart?includeTasks=true&onlyFailed=false")}


class ConnectError(Exception):
    """The worker answered with an error (its status and message), or could not be reached (status 502)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class TaskRow:
    task_id: int
    state: str
    worker_id: str
    trace: str = ""


@dataclass(frozen=True)
class ConnectorRow:
    name: str
    type: str
    state: str
    worker_id: str
    connector_class: str
    tasks: list[TaskRow] = field(default_factory=list)


def _request(url: str, method: str = "GET") -> Any:
    request = urllib.request.Request(url, method=method, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("message", exc.reason)
        except (ValueError, AttributeError):
            message = exc.reason
        raise ConnectError(exc.code, f"Connect answered {exc.code}: {message}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConnectError(502, f"cannot reach Connect at {url.split('/connectors')[0]}: {reason}") from None
    return json.loads(body) if body else None


async def _first_answering(urls: tuple[str, ...], path: str, method: str = "GET") -> Any:
    """The answer of the first worker that can be reached (any worker serves the whole Connect cluster)."""
    failure = ConnectError(502, "no Connect URL configured")
    for base in urls:
        try:
            return await asyncio.to_thread(_request, base.rstrip("/") + path, method)
        except ConnectError as exc:
            if exc.status != 502:
                raise
            failure = exc
    raise failure


def _row(name: str, entry: dict[str, Any]) -> ConnectorRow:
    status = entry.get("status") or {}
    info = entry.get("info") or {}
    connector = status.get("connector") or {}
    tasks = [TaskRow(int(t.get("id", 0)), str(t.get("state", "")), str(t.get("worker_id", "")),
                     str(t.get("trace", "")).splitlines()[0] if t.get("trace") else "")
             for t in status.get("tasks") or ()]
    return ConnectorRow(name, str(status.get("type") or info.get("type") or ""), str(connector.get("state", "")),
                        str(connector.get("worker_id", "")),
                        str((info.get("config") or {}).get("connector.class", "")),
                        sorted(tasks, key=lambda t: t.task_id))


async def list_connectors(urls: tuple[str, ...]) -> list[ConnectorRow]:
    """Every connector of the Connect cluster, with its state and its tasks' states."""
    answer = await _first_answering(urls, "/connectors?expand=status&expand=info")
    return sorted((_row(name, entry) for name, entry in (answer or {}).items()), key=lambda r: r.name)


async def connector_action(urls: tuple[str, ...], name: str, action: str) -> None:
    """Pause, resume or restart (with its tasks) one connector."""
    method, path = ACTIONS[action]
    await _first_answering(urls, f"/connectors/{quote(name, safe='')}{path}", method)
