"""Schema validation of produced batches, as the log runs it after its record walk: every codec, keys and values,
the batch refused whole."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from moldau.protocol import record_validation as rv
from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import BATCH_HEADER_SIZE, BatchHeader, parse_header
from moldau.protocol.record_validation import RecordErrors, validate_batch_records
from moldau.registry import avro_fast
from moldau.registry.produce_validation import records_check, schema_validation
from moldau.registry.validation import (
    FieldSettings,
    SchemaValidation,
    SubjectNameStrategy,
    check_records,
    check_records_section,
)
from moldau.storage.log_config import LogConfig
from tests.unit.protocol.test_record_validation import with_records
from tests.unit.registry.schema_fixtures import RegistryLookup, avro, orders

VALUE = SchemaValidation(value=FieldSettings(False, SubjectNameStrategy.TOPIC))
CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd


def batch(values: Sequence[bytes | None], compression: int = 0) -> tuple[BatchHeader, memoryview]:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=2**24)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=value, headers=[("h", b"x")])
    view = memoryview(bytes(builder.build()))
    return parse_header(view), view


def check_produced_batches(topic: str, settings: SchemaValidation, batches: list[tuple[BatchHeader, memoryview]],
                           lookup: RegistryLookup | None) -> None:
    """What the log does with a client's batches: the record walk, then the topic's check of the sound records."""
    check = records_check(topic, settings, lookup)
    for header, view in batches:
        validate_batch_records(view, header, from_client=True, records_check=check)


@pytest.fixture
def lookup() -> RegistryLookup:
    registry = RegistryLookup()
    registry.register("orders-value", 1, {"type": "record", "name": "Order", "namespace": "com.example",
                                          "fields": [{"name": "id", "type": "long"},
                                                     {"name": "item", "type": "string"}]})
    return registry


def test_topics_without_validation_have_no_settings() -> None:
    assert schema_validation(LogConfig()) is None
    settings = schema_validation(LogConfig(value_schema_validation=True,
                                           value_subject_name_strategy="RecordNameStrategy"))
    assert settings == SchemaValidation(value=FieldSettings(False, SubjectNameStrategy.RECORD))


@pytest.mark.parametrize("codec", CODECS)
def test_valid_batches_of_every_codec_pass(lookup: RegistryLookup, codec: int) -> None:
    check_produced_batches("orders", VALUE, [batch([*orders(1, range(50)), None], codec)], lookup)


@pytest.mark.parametrize("codec", CODECS)
def test_a_failing_record_refuses_its_batch_with_invalid_record(lookup: RegistryLookup, codec: int) -> None:
    values: list[bytes | None] = [*orders(1, range(3)), b"not wire format", *orders(7, [1])]
    with pytest.raises(RecordErrors) as refused:
        check_produced_batches("orders", VALUE, [batch(orders(1, [9])), batch(values, codec)], lookup)
    assert refused.value.code is ErrorCode.invalid_record
    assert [i for i, _ in refused.value.record_errors] == [3, 4]
    assert refused.value.record_errors[1][1] == "record 4: value schema id 7 is not known to the schema registry"
    assert refused.value.message.startswith("schema validation failed on topic 'orders': record 3: the value is "
                                            "not in the schema registry's wire format")
    assert refused.value.message.endswith(" (and 1 more)")


def test_without_a_registry_validated_topics_refuse_records() -> None:
    with pytest.raises(RecordErrors, match="runs no schema registry") as refused:
        check_produced_batches("orders", VALUE, [batch(orders(1, [1]))], None)
    assert refused.value.code is ErrorCode.invalid_record


def test_records_that_do_not_parse_are_corrupt(lookup: RegistryLookup) -> None:
    _, view = batch(orders(1, [1]))
    broken = memoryview(with_records(bytes(view), bytes(view[BATCH_HEADER_SIZE:-3])))
    with pytest.raises(RecordErrors) as refused:
        check_produced_batches("orders", VALUE, [(parse_header(broken), broken)], lookup)
    assert refused.value.code is ErrorCode.corrupt_message


def test_the_c_and_python_readers_agree_on_mutated_records() -> None:
    if not rv.native_walker_loaded():
        pytest.skip("the C reader is not built")
    rng = random.Random(20261125)
    for _ in range(3000):
        values = [rng.randbytes(rng.randint(0, 30)) if rng.random() < 0.9 else None
                  for _ in range(rng.randint(1, 5))]
        records = bytearray(batch(values)[1][BATCH_HEADER_SIZE:])
        for _ in range(rng.randint(0, 3)):
            records[rng.randrange(len(records))] = rng.randrange(256)
        if rng.random() < 0.2:
            records = records[: rng.randrange(len(records) + 1)]
        outcomes: list[list[tuple[bytes | None, bytes | None]] | str] = []
        for reader in (rv.key_values, rv._key_values_py):
            try:
                outcomes.append(reader(bytes(records)))
            except ValueError:
                outcomes.append("refused")
        assert outcomes[0] == outcomes[1], bytes(records)
    assert rv.key_values is not rv._key_values_py


def test_the_section_check_finds_what_the_record_by_record_check_finds(
        lookup: RegistryLookup, monkeypatch: pytest.MonkeyPatch) -> None:
    lookup.register("orders-key", 2, "string")
    lookup.register("orders-value", 3, {"type": "record", "name": "Other", "fields": [
        {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}}]})  # never compiled
    rng = random.Random(20261125)
    good_values = [*orders(1, range(5)), avro(3, {"type": "record", "name": "Other", "fields": [
        {"name": "when", "type": "long"}]}, {"when": 5})]
    bad_values = [b"plain", orders(1, [1])[0][:-1], orders(9, [1])[0], orders(1, [1])[0] + b"\x00"]
    keys = [None, avro(2, "string", "k"), b"plain key", avro(2, "string", "k")[:-1]]
    both = SchemaValidation(key=FieldSettings(True, SubjectNameStrategy.TOPIC), value=VALUE.value)
    for _ in range(300):
        values = [rng.choice(good_values) if rng.random() < 0.8 else rng.choice([*bad_values, None])
                  for _ in range(rng.randint(1, 8))]
        batch_keys = [rng.choice(keys) for _ in values]
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=2**24)
        for i, (key, value) in enumerate(zip(batch_keys, values, strict=True)):
            builder.append(i, timestamp=0, key=key, value=value, headers=[])
        section = bytes(builder.build())[BATCH_HEADER_SIZE:]
        for settings in (VALUE, both):
            expected = check_records("orders", settings, rv.key_values(section), lookup)
            assert check_records_section("orders", settings, section, lookup) == expected
            with monkeypatch.context() as without_c:
                without_c.setattr(avro_fast, "schema_ids", None)
                assert check_records_section("orders", settings, section, lookup) == expected


def test_the_section_check_refuses_exactly_the_sections_that_do_not_parse(lookup: RegistryLookup) -> None:
    rng = random.Random(11)
    for _ in range(2000):
        records = bytearray(batch([*orders(1, range(rng.randint(1, 4))), None])[1][BATCH_HEADER_SIZE:])
        for _ in range(rng.randint(1, 3)):
            records[rng.randrange(len(records))] = rng.randrange(256)
        if rng.random() < 0.3:
            records = records[: rng.randrange(len(records) + 1)]
        outcomes: list[list[tuple[int, str]] | str] = []
        checks: tuple[Callable[[bytes], list[tuple[int, str]]], ...] = (
            lambda r: check_records_section("orders", VALUE, r, lookup),
            lambda r: check_records("orders", VALUE, rv.key_values(r), lookup))
        for check in checks:
            try:
                outcomes.append(check(bytes(records)))
            except ValueError:
                outcomes.append("does not parse")
        assert outcomes[0] == outcomes[1], bytes(records)
