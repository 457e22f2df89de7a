"""Typed access to the fields of a consumed confluent-kafka message that a test relies on being present.

confluent-kafka types every field of a Message as optional (an error event has no partition, offset or value;
a tombstone has no value). A test that reads a record it produced knows better: these helpers return the field
typed as present and fail with a message that says which field of which record was missing.
"""

from __future__ import annotations

from confluent_kafka import Message


def _where(msg: Message) -> str:
    return f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"


def value_of(msg: Message) -> bytes:
    """The record's value; a tombstone (no value) is a failure."""
    value = msg.value()
    if value is None:
        raise AssertionError(f"record {_where(msg)} has no value (error: {msg.error()})")
    return value


def key_of(msg: Message) -> bytes:
    """The record's key; a record without a key is a failure."""
    key = msg.key()
    if key is None:
        raise AssertionError(f"record {_where(msg)} has no key (error: {msg.error()})")
    return key


def partition_of(msg: Message) -> int:
    """The record's partition; an event that is not a record (an error without a partition) is a failure."""
    partition = msg.partition()
    if partition is None:
        raise AssertionError(f"message of {msg.topic()} has no partition (error: {msg.error()})")
    return partition


def offset_of(msg: Message) -> int:
    """The record's offset; an event that is not a record (an error without an offset) is a failure."""
    offset = msg.offset()
    if offset is None:
        raise AssertionError(f"message of {msg.topic()}[{msg.partition()}] has no offset (error: {msg.error()})")
    return offset


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
