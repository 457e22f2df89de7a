"""Schema validation of produced batches, as the log's further check of each client batch's records.

Only topics with `confluent.key.schema.validation` or `confluent.value.schema.validation` on pay for it: the
produce path asks `schema_validation(config)` first, a few attribute reads, and hands the log a `records_check`
only for those. The log calls it for each batch once its record walk has found the records sound, with the records
section it already decompressed (so nothing is decompressed twice), before anything of the request's batches for
the partition is appended. `moldau.registry.validation.check_records_section` then checks them: Avro keys and
values by a C walk over the whole section, the rest read one by one and checked in full. A batch with a failing
record is refused whole with INVALID_RECORD and one `record_errors` entry per failing record.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import BatchHeader
from moldau.protocol.record_validation import RecordErrors, RecordsCheck
from moldau.registry.validation import SchemaLookup, SchemaValidation, check_records_section
from moldau.storage.log_config import LogConfig

__all__ = ["records_check", "schema_validation"]


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
        try:
            errors = check_records_section(topic, settings, records, lookup)
        except ValueError as exc:  # the log's walk refuses such records before this is called
            message = f"records do not parse: {exc}"
            raise RecordErrors(ErrorCode.corrupt_message, message, [(0, message)]) from exc
        if errors:
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise RecordErrors(ErrorCode.invalid_record,
                               f"schema validation failed on topic '{topic}': {errors[0][1]}{more}", errors)

    return check
