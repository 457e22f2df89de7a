"""Kafka-style ``.properties`` files and ``--override key=value`` flags, read into dicts of raw strings."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator

from moldau.config.schema import ConfigError

_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a ``.properties`` file (UTF-8) into a dict; see ``parse_properties`` for the syntax."""
    with open(path, encoding="utf-8") as file:
        return parse_properties(file.read())


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``.properties`` text as java.util.Properties does; later keys win.

    Lines starting with ``#`` or ``!`` are comments. A key ends at the first unescaped ``=``, ``:`` or
    blank; one ``=`` or ``:`` and the blanks around it separate key from value. A line ending in an odd
    number of backslashes continues on the next line, whose leading blanks are dropped. Escapes
    (``\\t``, ``\\n``, ``\\uXXXX``, ``\\=`` ...) are resolved. Values are stripped of surrounding blanks,
    since Kafka ignores them anyway. Raises ConfigError for a malformed ``\\u`` escape.
    """
    entries: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_entry(line)
        entries[key] = value.strip()
    return entries


def _logical_lines(text: str) -> Iterator[str]:
    """Join continued lines and drop blank and comment lines."""
    pending: str | None = None
    for natural in re.split(r"\r\n|\r|\n", text):
        line = natural.lstrip(_BLANKS)
        # Only the first natural line of a logical line can be a comment or blank.
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def _split_entry(line: str) -> tuple[str, str]:
    """Split a logical line into an unescaped key and value."""
    end = 0
    while end < len(line) and line[end] not in "=:" + _BLANKS:
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    rest = line[end:].lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANKS)
    return _unescape(line[:end]), _unescape(rest)


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        index += 1
        if char != "\\" or index == len(text):
            # A lone trailing backslash can only remain from a continuation at the end of the file.
            out.append("" if char == "\\" else char)
            continue
        char = text[index]
        index += 1
        if char == "u":
            out.append(_unicode_escape(text[index : index + 4]))
            index += 4
        else:
            out.append(_ESCAPES.get(char, char))
    return "".join(out)


def _unicode_escape(digits: str) -> str:
    if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
        raise ConfigError(f"Malformed \\uxxxx encoding in properties: \\u{digits}")
    return chr(int(digits, 16))


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """Parse ``key=value`` flag values (``--override``); later ones win. Raises ConfigError."""
    overrides: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"Invalid override {item!r}: expected key=value")
        overrides[key.strip()] = value.strip()
    return overrides
