"""Raw HTTP to a schema registry, for what confluent-kafka's client does not expose (error bodies of bad input,
verbose compatibility messages): one request, the status and decoded JSON body."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def http(url: str, method: str = "GET", body: object = None, raw: bytes | None = None,
         content_type: str = CONTENT_TYPE) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.headers["Content-Type"].startswith(CONTENT_TYPE)
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        assert error.headers["Content-Type"].startswith(CONTENT_TYPE)
        return error.code, json.loads(error.read())
