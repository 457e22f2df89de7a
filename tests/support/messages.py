"""Typed access to the fields of a consumed confluent-kafka message that a test relies on being present.

confluent-kafka types every field of a Message as optional (an error event has no partition, offset or value;
a tombstone has no value). A test that reads a record it produced knows better: these helpers return the field
typed as present and fail with a message that says which field of which record was missing.
"""

from __future__ import annotations

from typing import TypeVar

from confluent_kafka import Message

T = TypeVar("T")


def _where(msg: Message) -> str:
    return f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"


def _present(field: T | None, name: str, msg: Message) -> T:
    if field is None:
        raise AssertionError(f"message {_where(msg)} has no {name} (error: {msg.error()})")
    return field


def value_of(msg: Message) -> bytes:
    """The record's value; a tombstone (no value) is a failure."""
    return _present(msg.value(), "value", msg)


def key_of(msg: Message) -> bytes:
    """The record's key; a record without a key is a failure."""
    return _present(msg.key(), "key", msg)


def partition_of(msg: Message) -> int:
    """The record's partition; an event that is not a record (an error without a partition) is a failure."""
    return _present(msg.partition(), "partition", msg)


def offset_of(msg: Message) -> int:
    """The record's offset; an event that is not a record (an error without an offset) is a failure."""
    return _present(msg.offset(), "offset", msg)


def headers_of(msg: Message) -> tuple[tuple[str, bytes | None], ...]:
    """The record's headers as (name, value) pairs in order, () when it has none; a header without a value
    reads as None. A consumer returns them as a list of pairs with byte values (the stubs also allow the
    producing side's dict and text values)."""
    headers = msg.headers() or []
    pairs: list[tuple[str, bytes | None]] = []
    for name, value in (headers.items() if isinstance(headers, dict) else headers):
        if isinstance(value, str):
            raise AssertionError(f"record {_where(msg)} has header {name!r} as text, not bytes")
        pairs.append((name, value))
    return tuple(pairs)
