"""What a message-browser view asks for, read from (and written back to) the page's query string, so every view is
a link: `?partition=0&from=offset&offset=42&count=50&q=order-7&search=key`.

`from` is where reading starts: `beginning`, `end` (the newest `count` records), `offset`, `timestamp` (the first
record at or after it, as ListOffsets by time finds it), or `after` / `before` a set of positions per partition
(`positions=0:42,1:17`), which the Older and Newer links use to page through every partition at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from urllib.parse import urlencode

from moldau.console.errors import ConsoleError
from moldau.text import ascii_digits

__all__ = ["COUNT_DEFAULT", "COUNT_MAX", "SEARCH_SCAN_MAX", "STARTS", "BrowseQuery", "parse_query"]

COUNT_DEFAULT = 50
COUNT_MAX = 500
SEARCH_SCAN_MAX = 10_000  # a search reads at most this many records per request
STARTS = ("beginning", "end", "offset", "timestamp", "after", "before")
SEARCHES = ("text", "key")


@dataclass(frozen=True)
class BrowseQuery:
    partition: int | None = None  # None: every partition
    start: str = "end"
    offset: int | None = None
    timestamp_ms: int | None = None
    positions: dict[int, int] = field(default_factory=dict)  # for after/before
    count: int = COUNT_DEFAULT
    q: str = ""
    search: str = "text"  # "text": in the key or the value; "key": the key equals q

    def params(self, **changes: object) -> str:
        """This view's query string, with `changes` applied (for links to other views)."""
        query = replace(self, **changes)  # type: ignore[arg-type]
        values: dict[str, str] = {"from": query.start, "count": str(query.count)}
        if query.partition is not None:
            values["partition"] = str(query.partition)
        if query.start == "offset" and query.offset is not None:
            values["offset"] = str(query.offset)
        if query.start == "timestamp" and query.timestamp_ms is not None:
            values["timestamp"] = str(query.timestamp_ms)
        if query.start in ("after", "before"):
            values["positions"] = query.positions_text
        if query.q:
            values["q"], values["search"] = query.q, query.search
        return urlencode(values)

    @property
    def positions_text(self) -> str:
        return ",".join(f"{p}:{o}" for p, o in sorted(self.positions.items()))

    @property
    def timestamp_text(self) -> str:
        """The timestamp as the form's datetime-local field wants it (UTC)."""
        if self.timestamp_ms is None:
            return ""
        return datetime.fromtimestamp(self.timestamp_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def parse_query(params: Mapping[str, str]) -> BrowseQuery:
    """A BrowseQuery from a request's query parameters. Raises ConsoleError(400) on bad input."""
    start = params.get("from") or "end"
    if start not in STARTS:
        raise ConsoleError(400, f"from must be one of {', '.join(STARTS)}, not {start!r}")
    search = params.get("search") or "text"
    if search not in SEARCHES:
        raise ConsoleError(400, f"search must be text or key, not {search!r}")
    count = _int(params, "count", COUNT_DEFAULT)
    if not 1 <= count <= COUNT_MAX:
        raise ConsoleError(400, f"count must be between 1 and {COUNT_MAX}")
    partition_text = params.get("partition", "")
    partition = None if partition_text in ("", "all") else _int(params, "partition", 0)
    if partition is not None and partition < 0:
        raise ConsoleError(400, "partition must be 0 or more")
    query = BrowseQuery(partition=partition, start=start, count=count, q=params.get("q", ""), search=search)
    if start == "offset":
        offset = _int(params, "offset", 0)
        if offset < 0:
            raise ConsoleError(400, "offset must be 0 or more")
        query = replace(query, offset=offset)
    elif start == "timestamp":
        query = replace(query, timestamp_ms=_timestamp_ms(params.get("timestamp", "")))
    elif start in ("after", "before"):
        query = replace(query, positions=_positions(params.get("positions", "")))
    return query


def _int(params: Mapping[str, str], name: str, default: int) -> int:
    text = params.get(name, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ConsoleError(400, f"{name} must be a whole number, not {text!r}") from None


def _timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 date and time (UTC unless it names a zone)."""
    text = text.strip()
    if not text:
        raise ConsoleError(400, "from=timestamp needs a timestamp (milliseconds or a date and time)")
    if ascii_digits(text):
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConsoleError(400, f"timestamp {text!r} is neither milliseconds nor an ISO 8601 date and time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _positions(text: str) -> dict[int, int]:
    positions: dict[int, int] = {}
    for item in filter(None, text.split(",")):
        partition, _, offset = item.partition(":")
        try:
            positions[int(partition)] = int(offset)
        except ValueError:
            raise ConsoleError(400, f"positions must look like 0:42,1:17, not {text!r}") from None
    if not positions:
        raise ConsoleError(400, "from=after and from=before need positions, like 0:42,1:17")
    return positions
