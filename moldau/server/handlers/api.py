"""The contract every handler module fulfils, and the registry of them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from moldau.server.context import RequestContext

HandleFn = Callable[[RequestContext, Any], Awaitable[Any]]
# A handler's own request decoder: (frame, body start, version) -> request. Raises codec.InvalidRequest.
DecodeFn = Callable[[bytes | memoryview, int, int], Any]


@dataclass(frozen=True, slots=True)
class Api:
    """One Kafka API: its key, the versions served (exactly what is implemented) and the handler.

    A handler returns the response entity of the request's version, or None when no response is sent
    (Produce with acks=0).
    """

    key: int
    name: str
    min_version: int
    max_version: int
    handle: HandleFn
    decode: DecodeFn | None = None  # None: kio decodes the request

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version
