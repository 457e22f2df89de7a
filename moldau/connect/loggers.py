"""Log levels as Kafka Connect's `/admin/loggers` (KIP-495) shows and changes them: Kafka's level names (TRACE,
DEBUG, INFO, WARN, ERROR, FATAL, OFF) mapped onto Python's `logging`, and when each level was last set
through the API. The clock (milliseconds since the epoch) is injected."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = ["LoggerLevels", "UnknownLevel", "UnknownLogger", "kafka_level", "python_level"]

ROOT = "root"
TRACE = 5  # Python has no TRACE; below DEBUG, as in Log4j
OFF = logging.CRITICAL + 10  # above every level a record can have
LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": OFF}


class UnknownLogger(LookupError):
    pass


class UnknownLevel(ValueError):
    pass


def python_level(name: str) -> int:
    """The Python level for a Kafka level name (case-insensitive; WARNING and CRITICAL are accepted too)."""
    text = name.strip().upper()
    text = {"WARNING": "WARN", "CRITICAL": "FATAL"}.get(text, text)
    if text not in LEVELS:
        raise UnknownLevel(f"Invalid log level '{name}'; expected one of {', '.join(LEVELS)}")
    return LEVELS[text]


def kafka_level(level: int) -> str:
    """The Kafka name of the highest Kafka level at or below a Python level."""
    name = "TRACE"
    for candidate, value in LEVELS.items():
        if value <= level:
            name = candidate
    return name


class LoggerLevels:
    def __init__(self, clock_ms: Callable[[], int]) -> None:
        self.clock_ms = clock_ms
        self.modified: dict[str, int] = {}

    @staticmethod
    def _existing() -> dict[str, logging.Logger]:
        """Every logger created so far (placeholders for parents nobody asked for are not loggers)."""
        known = {name: logger for name, logger in logging.Logger.manager.loggerDict.items()
                 if isinstance(logger, logging.Logger)}
        return {ROOT: logging.getLogger(), **known}

    def _describe(self, name: str, logger: logging.Logger) -> dict[str, Any]:
        return {"level": kafka_level(logger.getEffectiveLevel()), "last_modified": self.modified.get(name)}

    def all(self) -> dict[str, dict[str, Any]]:
        """The loggers with a level of their own (and the root logger), by name."""
        return {name: self._describe(name, logger) for name, logger in sorted(self._existing().items())
                if name == ROOT or logger.level != logging.NOTSET}

    def level(self, name: str) -> dict[str, Any]:
        logger = self._existing().get(name)
        if logger is None:
            raise UnknownLogger(f"Logger {name} not found.")
        return self._describe(name, logger)

    def set_level(self, name: str, level: str) -> list[str]:
        """Set `name` and every logger below it to `level`; the names of the loggers changed, sorted. The
        logger is created if it does not exist yet, as Kafka does."""
        value = python_level(level)
        if name != ROOT:
            logging.getLogger(name)
        affected = sorted(n for n in self._existing() if name == ROOT or n == name or n.startswith(name + "."))
        now = self.clock_ms()
        for affected_name in affected:
            logger = logging.getLogger() if affected_name == ROOT else logging.getLogger(affected_name)
            logger.setLevel(value)
            self.modified[affected_name] = now
        return affected
