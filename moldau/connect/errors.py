"""Kafka Connect's exception hierarchy: what plugins raise and the runtime reports."""

from __future__ import annotations

__all__ = ["ConfigException", "ConnectException", "DataException", "NotFoundError", "RetriableException"]


class ConnectException(Exception):
    """A failure of a connector, task, converter or transform (Kafka's ConnectException)."""


class RetriableException(ConnectException):
    """A transient failure: the runtime retries the operation instead of failing the task."""


class DataException(ConnectException):
    """Data that does not fit its schema, or that a converter cannot (de)serialize."""


class ConfigException(ConnectException):
    """A configuration value that is missing or invalid; `name` is the key at fault."""

    def __init__(self, name: str, value: object = None, message: str | None = None) -> None:
        self.name = name
        self.value = value
        self.reason = message or "invalid value"
        super().__init__(f"Invalid value {value} for configuration {name}: {self.reason}"
                         if value is not None else f"Invalid configuration {name}: {self.reason}")


class NotFoundError(ConnectException):
    """A connector, task or plugin that does not exist."""
