"""Typed access to the schemas confluent-kafka's registry client returns, where a test relies on a field the
client types as optional."""

from __future__ import annotations

from confluent_kafka.schema_registry import Schema


def schema_text(schema: Schema) -> str:
    """The schema's text; the client types it optional, a schema the registry answered always has one."""
    if schema.schema_str is None:
        raise AssertionError(f"the registry answered a schema without its text: {schema!r}")
    return schema.schema_str
