"""Metadata records encode to JSON and back; records written before a field existed still decode."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any, get_args

import pytest

from moldau.metadata.records import (
    Endpoint,
    FenceBrokerRecord,
    MetadataRecord,
    RecordDecodeError,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    decode_record,
    encode_record,
)

# Exactly what the single-node code wrote before broker epochs and fencing existed.
OLD_REGISTRATION = (
    b'{"broker_id":1,"incarnation_id":"00000000-0000-0000-0000-000000000007",'
    b'"endpoints":[{"listener":"PLAINTEXT","host":"127.0.0.1","port":9092,"security_protocol":"PLAINTEXT"}],'
    b'"rack":null,"type":"register_broker"}'
)


def test_old_registration_decodes_as_unfenced_without_epoch() -> None:
    record = decode_record(OLD_REGISTRATION)
    assert record == RegisterBrokerRecord(1, uuid.UUID(int=7), (Endpoint("PLAINTEXT", "127.0.0.1", 9092),), None)
    assert isinstance(record, RegisterBrokerRecord)
    assert record.broker_epoch == -1 and record.fenced is False


def test_new_registration_writes_epoch_and_fenced_explicitly() -> None:
    record = RegisterBrokerRecord(2, uuid.uuid4(), (Endpoint("EXTERNAL", "h", 1, "SSL"),), "rack-a",
                                  broker_epoch=42, fenced=True)
    body = json.loads(encode_record(record))
    assert body["broker_epoch"] == 42 and body["fenced"] is True
    assert decode_record(encode_record(record)) == record


@pytest.mark.parametrize("record", [
    FenceBrokerRecord(1, 5), UnfenceBrokerRecord(2, 6), UnregisterBrokerRecord(3, 7),
])
def test_broker_state_records_round_trip(record: MetadataRecord) -> None:
    assert decode_record(encode_record(record)) == record


def test_missing_required_field_is_an_error() -> None:
    with pytest.raises(RecordDecodeError):
        decode_record(b'{"type":"fence_broker","broker_id":1}')


def test_unknown_type_is_an_error() -> None:
    with pytest.raises(RecordDecodeError):
        decode_record(b'{"type":"no_such_record"}')


# A value of each field type the records use, for building one record of every type.
_SAMPLES: dict[str, object] = {
    "bool": True,
    "float": 1.5,
    "int": 7,
    "str": "name",
    "str | None": None,
    "tuple[Endpoint, ...]": (Endpoint("PLAINTEXT", "127.0.0.1", 9092), Endpoint("SSL", "h", 1, "SSL")),
    "tuple[int, ...]": (1, 2, 3),
    "tuple[str, ...]": ("a", "b"),
    "tuple[tuple[str, str | None], ...]": (("client-id", None), ("user", "alice")),
    "uuid.UUID": uuid.UUID(int=9),
}


_RECORD_TYPES: list[type[Any]] = list(get_args(MetadataRecord))


@pytest.mark.parametrize("cls", _RECORD_TYPES, ids=[cls.TYPE for cls in _RECORD_TYPES])
def test_every_record_type_encodes_as_its_fields_in_order_and_round_trips(cls: type[Any]) -> None:
    record = cls(**{f.name: _SAMPLES[str(f.type)] for f in dataclasses.fields(cls)})
    encoded = encode_record(record)
    # The JSON the log has always held: every field in declaration order (nested dataclasses as objects), then the
    # type tag.
    expected = json.dumps({**dataclasses.asdict(record), "type": cls.TYPE}, default=str, separators=(",", ":"))
    assert encoded == expected.encode()
    assert decode_record(encoded) == record
