"""Java `SimpleDateFormat` patterns (what Kafka's TimestampConverter and TimestampRouter take), formatting and
parsing timestamps in UTC. Supported letters: y, M, d, H, h, k, m, s, S, a, E, D, Z, X, z and 'quoted' text;
others are rejected so a pattern never silently means something else."""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

from moldau.text import ascii_digits

_TOKEN = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|[^A-Za-z']+")
_SUPPORTED = set("yMdHhkmsSaEDZXz")
_MONTHS = list(calendar.month_name)[1:]
_DAYS = list(calendar.day_name)


class PatternError(ValueError):
    """A pattern letter this implementation does not know."""


@dataclass(frozen=True)
class Token:
    letter: str  # "" for literal text
    width: int
    text: str = ""


def compile_pattern(pattern: str) -> tuple[Token, ...]:
    tokens = []
    for m in _TOKEN.finditer(pattern):
        piece = m.group(0)
        if piece.startswith("'"):
            tokens.append(Token("", 0, "'" if piece == "''" else piece[1:-1].replace("''", "'")))
        elif m.group(1):
            if m.group(1) not in _SUPPORTED:
                raise PatternError(f"Illegal pattern character '{m.group(1)}'")
            tokens.append(Token(m.group(1), len(piece)))
        else:
            tokens.append(Token("", 0, piece))
    return tuple(tokens)


def format_millis(tokens: tuple[Token, ...], millis: int) -> str:
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=millis)
    return "".join(_format(t, moment) for t in tokens)


def _num(value: int, width: int) -> str:
    return str(value).zfill(width)


def _format(t: Token, m: dt.datetime) -> str:
    letter, w = t.letter, t.width
    if not letter:
        return t.text
    if letter == "y":
        return _num(m.year % 100, 2) if w == 2 else _num(m.year, w)
    if letter == "M":
        return _MONTHS[m.month - 1] if w >= 4 else _MONTHS[m.month - 1][:3] if w == 3 else _num(m.month, w)
    if letter == "E":
        return _DAYS[m.weekday()] if w >= 4 else _DAYS[m.weekday()][:3]
    if letter == "a":
        return "AM" if m.hour < 12 else "PM"
    if letter in "ZXz":
        return {"Z": "+0000", "X": "Z", "z": "UTC"}[letter]
    numbers = {"d": m.day, "H": m.hour, "h": (m.hour % 12) or 12, "k": m.hour or 24, "m": m.minute,
               "s": m.second, "S": m.microsecond // 1000, "D": m.timetuple().tm_yday}
    return _num(numbers[letter], w)


def parse_millis(tokens: tuple[Token, ...], text: str) -> int:
    """Milliseconds since the epoch of `text` written in the pattern (UTC unless it carries an offset)."""
    regex, names = _regex(tokens)
    m = re.fullmatch(regex, text.strip())
    if m is None:
        raise ValueError(f"Unparseable date: \"{text}\"")
    got = {name: m.group(f"g{i}") for i, name in enumerate(names)}
    year = int(got.get("y", "1970"))
    if "y" in got and len(got["y"]) == 2:
        year += 2000 if year < 70 else 1900
    hour = int(got.get("H") or got.get("k") or 0) % 24
    if "h" in got:
        hour = int(got["h"]) % 12 + (12 if got.get("a", "AM").upper() == "PM" else 0)
    month = _month(got["M"]) if "M" in got else 1
    moment = dt.datetime(year, month, int(got.get("d", "1")), hour, int(got.get("m", "0")), int(got.get("s", "0")),
                         int(got.get("S", "0")) * 1000, tzinfo=_zone(got))
    if "D" in got and "M" not in got:
        moment += dt.timedelta(days=int(got["D"]) - 1)
    return int((moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) / dt.timedelta(milliseconds=1))


def _month(text: str) -> int:
    if ascii_digits(text):
        return int(text)
    for i, name in enumerate(_MONTHS, start=1):
        if name.lower().startswith(text.lower()[:3]):
            return i
    raise ValueError("Unparseable month: " + text)


def _zone(got: dict[str, str]) -> dt.tzinfo:
    raw = got.get("Z") or got.get("X") or ""
    if raw in ("", "Z", "UTC", "GMT"):
        return dt.UTC
    sign = -1 if raw[0] == "-" else 1
    digits = raw[1:].replace(":", "")
    return dt.timezone(sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0)))


def _regex(tokens: tuple[Token, ...]) -> tuple[str, list[str]]:
    parts: list[str] = []
    names: list[str] = []
    for t in tokens:
        if not t.letter:
            parts.append(re.escape(t.text))
            continue
        if t.letter in "ME" and t.width >= 3:
            body = "[A-Za-z]+"
        elif t.letter == "a":
            body = "[AaPp][Mm]"
        elif t.letter in "ZXz":
            body = r"Z|UTC|GMT|[+-]\d{2}:?\d{2}|[+-]\d{2}"
        else:
            body = rf"\d{{{t.width}}}" if t.width > 1 else r"\d+"
        parts.append(f"(?P<g{len(names)}>{body})")
        names.append(t.letter)
    return "".join(parts), names
