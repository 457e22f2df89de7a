"""Broker-side schema validation (Confluent Server's `confluent.key|value.schema.validation`), free of I/O.

A topic with validation on accepts a record only if its key or value (whichever is validated):

- is in the schema registry's wire format: magic byte 0, the schema id as a 4-byte big-endian integer, for
  Protobuf the message indexes (a zigzag varint count, then that many zigzag varint indexes; a count of 0, the
  single byte 0, means [0], the first message of the file), then the serialized payload;
- names a schema id the registry knows;
- whose schema is registered under the subject the topic's subject name strategy names: TopicNameStrategy
  `<topic>-key` / `<topic>-value`, RecordNameStrategy the record's full name, TopicRecordNameStrategy
  `<topic>-<record full name>` (the record name comes from the schema, for Protobuf from the indexed message);
- and whose payload decodes under that schema (`ParsedSchema.check_payload`).

A null value (a tombstone) and a null key pass. The registry is seen through `SchemaLookup`; within one batch the
answers are remembered, so a batch of records with one schema asks the lookup once per question.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from moldau.protocol.record_validation import key_values
from moldau.registry import avro_fast
from moldau.registry.avro_fast import payload_check
from moldau.registry.formats.base import InvalidPayload, ParsedSchema

__all__ = [
    "FieldSettings",
    "SchemaLookup",
    "SchemaValidation",
    "SubjectNameStrategy",
    "WireFormatError",
    "check_records",
    "check_records_section",
    "read_message_indexes",
    "read_wire_header",
    "subject_name",
]

MAGIC_BYTE = 0
HEADER_SIZE = 5  # magic byte and schema id
PROTOBUF = "PROTOBUF"
_MAX_INDEXES = 1024  # a nesting depth no real .proto reaches; bounds the work a hostile header can ask for


class SchemaLookup(Protocol):
    """What validation asks of the schema registry; the registry's implementation caches schemas by id."""

    def schema_by_id(self, schema_id: int) -> ParsedSchema | None:
        """The schema registered with this id, or None when no subject holds it."""
        ...

    def subject_has_id(self, subject: str, schema_id: int) -> bool:
        """Whether a (not deleted) version of `subject` has this schema id."""
        ...


class SubjectNameStrategy(Enum):
    TOPIC = "TopicNameStrategy"
    RECORD = "RecordNameStrategy"
    TOPIC_RECORD = "TopicRecordNameStrategy"

    @classmethod
    def from_config(cls, name: str) -> SubjectNameStrategy:
        """From the short or the full class name (`io.confluent.kafka.serializers.subject.TopicNameStrategy`)."""
        return cls(name.rsplit(".", 1)[-1])


@dataclass(frozen=True, slots=True)
class FieldSettings:
    """Validation of one part of the record (key or value)."""

    is_key: bool
    strategy: SubjectNameStrategy

    @property
    def part(self) -> str:
        return "key" if self.is_key else "value"


@dataclass(frozen=True, slots=True)
class SchemaValidation:
    """A topic's validation settings: which parts are validated, with which strategy."""

    key: FieldSettings | None = None
    value: FieldSettings | None = None

    @classmethod
    def from_topic_config(cls, key_validation: bool, key_strategy: str, value_validation: bool,
                          value_strategy: str) -> SchemaValidation:
        return cls(FieldSettings(True, SubjectNameStrategy.from_config(key_strategy)) if key_validation else None,
                   FieldSettings(False, SubjectNameStrategy.from_config(value_strategy))
                   if value_validation else None)

    @property
    def enabled(self) -> bool:
        return self.key is not None or self.value is not None


class WireFormatError(ValueError):
    """The bytes are not in the schema registry's wire format; the message says why."""


def read_wire_header(data: bytes | memoryview) -> int:
    """The schema id of wire-format bytes (magic byte 0, 4-byte big-endian id). Raises WireFormatError."""
    if len(data) < HEADER_SIZE:
        raise WireFormatError(f"{len(data)} bytes are too short for the wire format's 5-byte header")
    if data[0] != MAGIC_BYTE:
        raise WireFormatError(f"magic byte {data[0]}, expected {MAGIC_BYTE}")
    return int.from_bytes(data[1:HEADER_SIZE], "big", signed=True)


def read_message_indexes(data: bytes | memoryview, pos: int) -> tuple[list[int], int]:
    """Protobuf message indexes starting at `pos`: (indexes, position of the payload). Raises WireFormatError."""
    count, pos = _read_zigzag(data, pos)
    if count == 0:
        return [0], pos  # the common case, the file's first message, is the single byte 0
    if count < 0 or count > _MAX_INDEXES:
        raise WireFormatError(f"invalid Protobuf message index count {count}")
    indexes = []
    for _ in range(count):
        index, pos = _read_zigzag(data, pos)
        if index < 0:
            raise WireFormatError(f"negative Protobuf message index {index}")
        indexes.append(index)
    return indexes, pos


def _read_zigzag(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    raw = shift = 0
    for _ in range(5):  # Java writes these as int32 varints
        if pos >= len(data):
            raise WireFormatError("the Protobuf message indexes run past the end")
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise WireFormatError("a Protobuf message index varint is longer than 5 bytes")


def subject_name(strategy: SubjectNameStrategy, topic: str, is_key: bool, record_name: str | None) -> str | None:
    """The subject a record's schema must be registered under; None when the strategy needs a record name and the
    schema names none."""
    if strategy is SubjectNameStrategy.TOPIC:
        return f"{topic}-{'key' if is_key else 'value'}"
    if record_name is None:
        return None
    return record_name if strategy is SubjectNameStrategy.RECORD else f"{topic}-{record_name}"


class _FieldCheck:
    """The checks of one part (key or value) within one batch. Apart from Protobuf, whose message indexes vary per
    record, everything but the payload depends on the schema id alone: it is decided once per id and batch, so the
    lookup is asked once per question and a record of a known id costs its header read and its decode."""

    def __init__(self, topic: str, settings: FieldSettings, lookup: SchemaLookup) -> None:
        self.topic, self.settings, self.lookup = topic, settings, lookup
        self.part = settings.part
        self._by_id: dict[int, ParsedSchema | str] = {}  # the schema to decode with, or why the id fails
        # The common case, looked up first: ids that passed everything but the payload, to their decoder.
        self._decoders: dict[int, Callable[[bytes, int], None]] = {}
        self._subjects: dict[tuple[str, int], bool] = {}

    def check(self, data: bytes) -> str | None:
        """Why this key or value fails validation, or None."""
        if len(data) >= HEADER_SIZE and data[0] == MAGIC_BYTE:
            decode = self._decoders.get(int.from_bytes(data[1:HEADER_SIZE], "big", signed=True))
            if decode is not None:
                try:
                    decode(data, HEADER_SIZE)
                    return None
                except InvalidPayload as exc:
                    return f"the {self.part} does not decode with schema id {read_wire_header(data)}: {exc}"
        return self._check_slowly(data)

    def _check_slowly(self, data: bytes) -> str | None:
        if len(data) < HEADER_SIZE or data[0] != MAGIC_BYTE:
            return self._not_wire_format(data)
        schema_id = read_wire_header(data)
        verdict = self._by_id.get(schema_id)
        if verdict is None:
            verdict = self._by_id[schema_id] = self._verdict(schema_id)
            if not isinstance(verdict, str) and verdict.schema_type != PROTOBUF:
                self._decoders[schema_id] = payload_check(verdict)
                return self.check(data)
        if isinstance(verdict, str):
            return verdict
        return self._check_protobuf(schema_id, verdict, data)

    def programs(self, schema_ids: Iterable[int]) -> dict[int, bytes]:
        """The fast walk's programs of those ids that pass everything but the payload and have one."""
        out = {}
        for schema_id in schema_ids:
            verdict = self._by_id.get(schema_id)
            if verdict is None:
                verdict = self._by_id[schema_id] = self._verdict(schema_id)
            if not isinstance(verdict, str) and verdict.schema_type != PROTOBUF:
                program = avro_fast.program(verdict)
                if program is not None:
                    out[schema_id] = program
        return out

    def _not_wire_format(self, data: bytes) -> str:
        try:
            read_wire_header(data)
        except WireFormatError as exc:
            return f"the {self.part} is not in the schema registry's wire format: {exc}"
        raise AssertionError("only called for bytes that are not in the wire format")

    def _verdict(self, schema_id: int) -> ParsedSchema | str:
        schema = self.lookup.schema_by_id(schema_id)
        if schema is None:
            return f"{self.part} schema id {schema_id} is not known to the schema registry"
        if schema.schema_type == PROTOBUF:
            return schema  # the subject may depend on the message indexes: decided per record
        return self._subject_reason(schema_id, schema, ()) or schema

    def _subject_reason(self, schema_id: int, schema: ParsedSchema, indexes: Sequence[int]) -> str | None:
        """Why the id is not registered under the subject the strategy names, or None."""
        strategy = self.settings.strategy
        subject = subject_name(strategy, self.topic, self.settings.is_key, _record_name(schema, strategy, indexes))
        if subject is None:
            return f"{self.part} schema id {schema_id} names no record, which {strategy.value} needs for the subject"
        registered = self._subjects.get((subject, schema_id))
        if registered is None:
            registered = self._subjects[(subject, schema_id)] = self.lookup.subject_has_id(subject, schema_id)
        if not registered:
            return f"{self.part} schema id {schema_id} is not registered under subject '{subject}'"
        return None

    def _check_protobuf(self, schema_id: int, schema: ParsedSchema, data: bytes) -> str | None:
        try:
            indexes, payload_at = read_message_indexes(data, HEADER_SIZE)
        except WireFormatError as exc:
            return f"the {self.part} is not in the schema registry's wire format: {exc}"
        reason = self._subject_reason(schema_id, schema, indexes)
        if reason is not None:
            return reason
        try:
            schema.check_payload(data[payload_at:], indexes)
        except InvalidPayload as exc:
            return f"the {self.part} does not decode with schema id {schema_id}: {exc}"
        return None


def check_records_section(topic: str, settings: SchemaValidation, section: bytes | memoryview,
                          lookup: SchemaLookup) -> list[tuple[int, str]]:
    """`check_records` of a batch's (decompressed) records section; raises ValueError where the records do not
    parse. The C walk of `avro_fast` vouches for the Avro keys and values it can in one call per part, without
    building objects; only the records it does not vouch for are read and checked one by one."""
    if avro_fast.schema_ids is None or avro_fast.unchecked is None:
        return check_records(topic, settings, key_values(section), lookup)
    suspects: set[int] = set()
    for field in (settings.key, settings.value):
        if field is not None:
            part = 0 if field.is_key else 1
            programs = _FieldCheck(topic, field, lookup).programs(avro_fast.schema_ids(section, part))
            suspects.update(avro_fast.unchecked(section, part, programs))
    if not suspects:
        return []
    pairs = key_values(section)
    return check_records(topic, settings, [pair if i in suspects else (None, None) for i, pair in enumerate(pairs)],
                         lookup)


def check_records(topic: str, settings: SchemaValidation, records: Iterable[tuple[bytes | None, bytes | None]],
                  lookup: SchemaLookup) -> list[tuple[int, str]]:
    """(index in the batch, message) for each record of one batch that fails validation; empty when all pass.

    `records` are the batch's (key, value) pairs in order; a message reads `record 3: <why>`.
    """
    keys = _FieldCheck(topic, settings.key, lookup) if settings.key is not None else None
    values = _FieldCheck(topic, settings.value, lookup) if settings.value is not None else None
    errors = []
    if keys is None and values is not None:  # the usual setting: a loop without the key's tests
        check = values.check
        for index, (_, value) in enumerate(records):
            if value is not None and (reason := check(value)) is not None:
                errors.append((index, f"record {index}: {reason}"))
        return errors
    for index, (key, value) in enumerate(records):
        reason = keys.check(key) if keys is not None and key is not None else None
        if reason is None and values is not None and value is not None:
            reason = values.check(value)
        if reason is not None:
            errors.append((index, f"record {index}: {reason}"))
    return errors


def _record_name(schema: ParsedSchema, strategy: SubjectNameStrategy, indexes: Sequence[int]) -> str | None:
    if strategy is SubjectNameStrategy.TOPIC:
        return None  # not needed: the subject is the topic's
    try:
        return schema.record_name(indexes)
    except (InvalidPayload, LookupError, ValueError):
        return None  # message indexes that select no message: the record names nothing
