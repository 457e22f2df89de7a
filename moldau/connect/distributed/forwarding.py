"""Requests from one worker to another over the REST API: a follower forwards config changes to the leader,
an owner sends task configs to the leader, and restarts go to the worker running what is restarted. Every
forwarded request carries `forward=false`, so that it is never forwarded twice (Kafka Connect does the same)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

__all__ = ["call", "connector_path", "forward_url", "worker_url"]

TIMEOUT_S = 30.0


def worker_url(worker_id: str) -> str:
    """The REST URL of the worker whose id (its advertised host:port) is `worker_id`."""
    return f"http://{worker_id}/"


def connector_path(name: str, suffix: str = "") -> str:
    return "/connectors/" + quote(name, safe="") + suffix


def forward_url(base: str, path: str, query: str) -> str:
    return base.rstrip("/") + path + "?" + (query + "&" if query else "") + "forward=false"


def call(url: str, method: str, body: bytes | None) -> tuple[int, bytes]:
    """(HTTP status, body) of one request; a worker that cannot be reached is a 409 as Kafka answers it."""
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError as exc:
        message = f"Cannot complete request because the worker at {url} could not be reached: {exc}"
        return 409, json.dumps({"error_code": 409, "message": message}).encode()


def call_json(base: str, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    return call(forward_url(base, path, ""), method, data)
