"""What the registry asks of a schema format; the formats themselves live beside this module.

The registry hands a format the schema text and the texts of every schema it references (resolved transitively,
keyed by the reference's `name`: an Avro full name, a JSON Schema `$ref` URL, a `.proto` import path), and gets
back a `ParsedSchema`. Compatibility is asked one pair at a time, always as "can a reader with schema `reader`
read data written with schema `writer`"; `moldau.registry.compatibility` turns the levels (BACKWARD, FORWARD,
FULL and their transitive forms) into such questions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol


class InvalidSchema(Exception):
    """The text is not a valid schema of its format (REST error 42201); the message says why and where."""


class InvalidPayload(Exception):
    """A record's bytes do not decode under the schema (the broker's INVALID_RECORD); the message says why."""


class ParsedSchema(Protocol):
    @property
    def schema_type(self) -> str:
        """Confluent's name of the format: "AVRO", "JSON" or "PROTOBUF"."""
        ...

    def canonical(self) -> str:
        """The text the registry stores and compares: equal for the same schema written the same way."""
        ...

    def normalized(self) -> str:
        """The canonical text after `normalize=true` rules (order-insensitive where the format allows)."""
        ...

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        """Why this schema, as a reader, cannot read data written with `writer`: one message per problem, naming the
        field or type; empty when it can."""
        ...

    def record_name(self, message_indexes: Sequence[int] = ()) -> str | None:
        """The record's full name for RecordNameStrategy: the Avro record's full name, the Protobuf message's full
        name (selected by the message indexes), a JSON Schema's `title`; None when the schema names none."""
        ...

    def check_payload(self, payload: bytes, message_indexes: Sequence[int] = ()) -> None:
        """Raise InvalidPayload unless `payload` (the record's bytes after the wire-format header) decodes under this
        schema: Avro binary, a JSON document valid against the JSON Schema, a Protobuf message (the one the indexes
        select). Called for every validated record, so implementations cache what they can."""
        ...


class SchemaFormat(Protocol):
    name: str  # "AVRO", "JSON" or "PROTOBUF"

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedSchema:
        """Parse `text`, resolving references from `references` (name -> schema text); raise InvalidSchema."""
        ...
