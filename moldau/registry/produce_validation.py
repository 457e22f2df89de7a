"""Schema validation of a Produce request's batches for one partition, before anything of them is appended.

Only topics with `confluent.key.schema.validation` or `confluent.value.schema.validation` on pay for it: the
produce path asks `schema_validation(config)` first, a few attribute reads. For those, each batch is
decompressed (every codec, bounded as the record walk bounds it) and checked by
`moldau.registry.validation.check_records_section`: Avro keys and values by a C walk over the whole section, the
rest read one by one (`moldau._records.key_values`) and checked in full. A batch with a failing record is refused
whole with INVALID_RECORD and one `record_errors` entry per failing record.
"""

from __future__ import annotations

from collections.abc import Sequence

from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import BatchHeader
from moldau.protocol.record_validation import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    RecordErrors,
    decompress_records,
)
from moldau.registry.validation import SchemaLookup, SchemaValidation, check_records_section
from moldau.storage.log_config import LogConfig

__all__ = ["check_produced_batches", "schema_validation"]


def schema_validation(config: LogConfig) -> SchemaValidation | None:
    """The topic's validation settings, or None when it validates nothing (the common, free case)."""
    if not (config.key_schema_validation or config.value_schema_validation):
        return None
    return SchemaValidation.from_topic_config(config.key_schema_validation, config.key_subject_name_strategy,
                                              config.value_schema_validation, config.value_subject_name_strategy)


def check_produced_batches(topic: str, settings: SchemaValidation,
                           batches: Sequence[tuple[BatchHeader, memoryview]], lookup: SchemaLookup | None,
                           max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> None:
    """Raise RecordErrors (INVALID_RECORD, or CORRUPT_MESSAGE for records that do not parse) unless every record
    of every batch passes the topic's schema validation."""
    if lookup is None:
        message = f"topic '{topic}' has schema validation on, but this broker runs no schema registry"
        raise RecordErrors(ErrorCode.invalid_record, message, [(0, message)])
    for header, view in batches:
        if header.is_control:
            continue  # refused by the log's own checks
        records = decompress_records(view, header, max_decompressed_bytes)
        try:
            errors = check_records_section(topic, settings, records, lookup)
        except ValueError as exc:
            message = f"records do not parse: {exc}"
            raise RecordErrors(ErrorCode.corrupt_message, message, [(0, message)]) from exc
        if errors:
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise RecordErrors(ErrorCode.invalid_record,
                               f"schema validation failed on topic '{topic}': {errors[0][1]}{more}", errors)
