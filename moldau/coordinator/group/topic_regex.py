"""KIP-848 regex subscriptions: a member's `SubscribedTopicRegex`, resolved by the coordinator against the
cluster's topic names.

The regex is RE2 syntax, as Kafka's coordinator reads it (RE2/J), compiled with google-re2: matching takes time
linear in the topic name, whatever a client sends, so no regex can stall the event loop (Python's `re`
backtracks). A regex must match a whole topic name, and never matches an internal topic (a name starting with
`__`, as `MetadataImage` tells internal topics).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import re2

__all__ = ["InvalidRegex", "matching_topics", "validate"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a client's bad regex is answered INVALID_REGULAR_EXPRESSION, not logged by RE2
# Compiled regexes kept; a group's members usually share one.
_CACHED = 256
_MAX_LENGTH = 16 * 1024  # longer is refused before compiling


class InvalidRegex(ValueError):
    """The regex does not compile; the message says why."""


@lru_cache(maxsize=_CACHED)
def _compiled(regex: str) -> Any:
    if len(regex) > _MAX_LENGTH:
        raise InvalidRegex(f"the regex is longer than {_MAX_LENGTH} characters")
    try:
        return re2.compile(regex, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidRegex(f"invalid regular expression {regex!r}: {reason}") from None


def validate(regex: str) -> None:
    """Raises InvalidRegex."""
    _compiled(regex)


def matching_topics(regex: str, topics: Iterable[str]) -> frozenset[str]:
    """The topics the regex matches whole, internal ones left out. Raises InvalidRegex."""
    pattern = _compiled(regex)
    return frozenset(t for t in topics if not t.startswith("__") and pattern.fullmatch(t) is not None)
