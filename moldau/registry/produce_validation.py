"""Schema validation of produced batches, as the log's further check of each client batch's records.

Only topics with `confluent.key.schema.validation` or `confluent.value.schema.validation` on pay for it: the
produce path asks `schema_validation(config)` first, a few attribute reads, and hands the log a `records_check`
only for those. The log calls it for each batch once its record walk has found the records sound, with the records
section it already decompressed (so nothing is decompressed twice), before anything of the request's batches for
the partition is appended. `moldau.registry.validation.check_records_section` then checks them: Avro keys and
values by a C walk over the whole section, the rest read one by one and checked in full. A batch with a failing
record is refused whole with INVALID_RECORD and one `record_errors` entry per failing record; when some of its
records name ids the registry does not know, the refusal says which (`UnknownSchemaIds`), so that the produce
path can catch up with `_schemas` and try once more.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import BatchHeader
from moldau.protocol.record_validation import RecordErrors, RecordsCheck
from moldau.registry.formats.base import ParsedSchema
from moldau.registry.validation import SchemaLookup, SchemaValidation, check_records_section
from moldau.storage.log_config import LogConfig

__all__ = ["UnknownSchemaIds", "records_check", "schema_validation"]


class UnknownSchemaIds(RecordErrors):
    """A refused batch some of whose records name schema ids this broker's registry does not know (yet): an id
    registered through another broker a moment ago may not be replayed here; the produce path catches up with
    `_schemas` and asks once more before it answers."""

    def __init__(self, errors: RecordErrors, schema_ids: frozenset[int]) -> None:
        super().__init__(errors.code, errors.message, errors.record_errors)
        self.schema_ids = schema_ids


class _NotingUnknown:
    """The lookup, noting the ids it does not know."""

    def __init__(self, lookup: SchemaLookup) -> None:
        self.lookup = lookup
        self.unknown: set[int] = set()

    def schema_by_id(self, schema_id: int) -> ParsedSchema | None:
        schema = self.lookup.schema_by_id(schema_id)
        if schema is None:
            self.unknown.add(schema_id)
        return schema

    def subject_has_id(self, subject: str, schema_id: int) -> bool:
        return self.lookup.subject_has_id(subject, schema_id)


def schema_validation(config: LogConfig) -> SchemaValidation | None:
    """The topic's validation settings, or None when it validates nothing (the common, free case)."""
    if not (config.key_schema_validation or config.value_schema_validation):
        return None
    return SchemaValidation.from_topic_config(config.key_schema_validation, config.key_subject_name_strategy,
                                              config.value_schema_validation, config.value_subject_name_strategy)


def records_check(topic: str, settings: SchemaValidation, lookup: SchemaLookup | None) -> RecordsCheck:
    """The check the log runs on each sound client batch of `topic`: raises RecordErrors (INVALID_RECORD) unless
    every record passes the topic's schema validation."""

    def check(header: BatchHeader, records: bytes | memoryview) -> None:
        if lookup is None:
            message = f"topic '{topic}' has schema validation on, but this broker runs no schema registry"
            raise RecordErrors(ErrorCode.invalid_record, message, [(0, message)])
        noting = _NotingUnknown(lookup)
        try:
            errors = check_records_section(topic, settings, records, noting)
        except ValueError as exc:  # the log's walk refuses such records before this is called
            message = f"records do not parse: {exc}"
            raise RecordErrors(ErrorCode.corrupt_message, message, [(0, message)]) from exc
        if errors:
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            refused = RecordErrors(ErrorCode.invalid_record,
                                   f"schema validation failed on topic '{topic}': {errors[0][1]}{more}", errors)
            if noting.unknown:
                raise UnknownSchemaIds(refused, frozenset(noting.unknown))
            raise refused

    return check
