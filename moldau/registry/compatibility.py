"""Compatibility levels (Confluent's names) and what each asks of a new schema against a subject's live versions.

A level is turned into reader/writer questions answered by the formats' `read_errors`: BACKWARD asks whether the
new schema reads data written with the old ones, FORWARD whether the old ones read data written with the new one,
FULL asks both; the `_TRANSITIVE` forms ask it of every live version, the others of the latest only.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from moldau.registry.formats.base import ParsedSchema


class CompatibilityLevel(StrEnum):
    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        return self.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.startswith(("FORWARD", "FULL"))


def compatibility_errors(level: CompatibilityLevel | str, new: ParsedSchema,
                         previous: Sequence[ParsedSchema]) -> list[str]:
    """Why `new` may not follow `previous` (the subject's live versions, oldest first) under `level`; empty when it
    may. Each message says which earlier schema (1-based position among the live versions, and whether it is the
    latest) and which direction failed, then the format's own message."""
    level = CompatibilityLevel(level)
    if level is CompatibilityLevel.NONE or not previous:
        return []
    count = len(previous)
    checked = range(count) if level.transitive else range(count - 1, count)
    errors: list[str] = []
    for index in reversed(checked):  # newest first: the latest version's problems are the most relevant
        old = previous[index]
        which = f"live version {index + 1} of {count}" + (" (latest)" if index == count - 1 else "")
        if level.backward:
            errors += [f"{level.value}: the new schema cannot read data written with {which}: {message}"
                       for message in new.read_errors(old)]
        if level.forward:
            errors += [f"{level.value}: {which} cannot read data written with the new schema: {message}"
                       for message in old.read_errors(new)]
    return errors
