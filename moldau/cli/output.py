"""`--output table|json` for the describe and list commands: one place that decides how a result is printed.

A command builds its result once as plain data (dicts, lists, numbers, strings, None) and hands it here with a
function that renders the same data as text. `table` (the default) prints that text for people; `json` prints
the data as one JSON document on stdout for scripts (`moldau topics list -o json | jq ...`), and nothing else on
stdout: notes meant for people go to stderr in both modes.

Tables become lists of objects whose keys are the column headers in snake case (`LOG-END-OFFSET` ->
`log_end_offset`); a missing value (shown as `-` in a table) is null.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from moldau.cli.table import format_table

TABLE, JSON = "table", "json"
CHOICES = (TABLE, JSON)


def add_output_option(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add `--output/-o table|json` (default table) to a describe or list command."""
    parser.add_argument("--output", "-o", choices=CHOICES, default=TABLE,
                        help="table for people (default) or json: one JSON document on stdout, for scripts")
    return parser


def wants_json(args: argparse.Namespace) -> bool:
    return getattr(args, "output", TABLE) == JSON


def key(header: str) -> str:
    """A column header as a JSON key: `LOG-END-OFFSET` -> `log_end_offset`, `LogEndOffset` -> `log_end_offset`."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", header)
    return re.sub(r"[^0-9a-z]+", "_", words.lower()).strip("_")


def records(rows: Iterable[Sequence[object]], headers: Sequence[str]) -> list[dict[str, Any]]:
    """Table rows as JSON objects keyed by their headers."""
    keys = [key(h) for h in headers]
    return [dict(zip(keys, row, strict=False)) for row in rows]


def emit(args: argparse.Namespace, document: Any, text: Callable[[], str]) -> None:
    """Print `document` as JSON, or `text()` for people (nothing when it is empty), on stdout."""
    if wants_json(args):
        json.dump(document, sys.stdout, indent=2, default=_plain)
        sys.stdout.write("\n")
        return
    shown = text()
    if shown:
        print(shown)


def emit_table(args: argparse.Namespace, rows: Sequence[Sequence[object]], headers: Sequence[str],
               empty: str | None = None) -> None:
    """Print rows as an aligned table (or `empty` when there are none), or as a JSON list of objects."""
    rows = list(rows)
    emit(args, records(rows, headers),
         lambda: empty if not rows and empty is not None else format_table(rows, headers=headers))


def _plain(value: Any) -> Any:
    """JSON for the few non-JSON values results hold: sets, tuples of pairs, enums, UUIDs, bytes."""
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    name = getattr(value, "name", None)
    if isinstance(name, str):
        return name
    return str(value)
