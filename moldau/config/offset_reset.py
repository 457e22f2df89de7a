"""`share.auto.offset.reset` values (KIP-932, KIP-1106): latest, earliest or by_duration:<ISO-8601 duration>."""

from __future__ import annotations

import re

from moldau.config.schema import ConfigValue, Custom

# share.auto.offset.reset=by_duration:<ISO-8601 duration>, as Java's Duration.parse reads it (days, hours,
# minutes, seconds with a fraction); a negative duration is refused.
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)
BY_DURATION = "by_duration:"


def duration_ms(text: str) -> int:
    """An ISO-8601 duration (PnDTnHnMn.nS) in milliseconds; raises ValueError."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.groups()):
        raise ValueError(f"{text!r} is not an ISO-8601 duration such as PT1H or P1DT30M")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def check_auto_offset_reset(value: ConfigValue) -> str | None:
    """Why `value` is no share.auto.offset.reset strategy (None: it is one)."""
    if not isinstance(value, str):
        return None
    lowered = value.strip().lower()
    if lowered in ("latest", "earliest"):
        return None
    if lowered.startswith(BY_DURATION):
        try:
            duration_ms(value.strip()[len(BY_DURATION):])
        except ValueError as exc:
            return str(exc)
        return None
    return "must be latest, earliest or by_duration:<ISO-8601 duration>"


AUTO_OFFSET_RESET = Custom(check_auto_offset_reset, "[latest, earliest, by_duration:<ISO-8601 duration>]")


