"""The registry's REST layer and state machine together, with the real Avro format and an in-memory store."""

from __future__ import annotations

import json
from typing import Any

import pytest

from moldau.registry.core import RegistryCore
from moldau.registry.http.app import build_app
from tests.unit.registry.registry_support import MemoryStore, call

V1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
V2 = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"], "default": None}]})
BREAKS = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "email", "type": "string"}]})
OTHER = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


class Registry:
    def __init__(self) -> None:
        self.core = RegistryCore(cluster_id="c1")
        self.store = MemoryStore(self.core)
        self.app = build_app(self.core, self.store)

    def __call__(self, method: str, path: str, body: object = None, **query: Any) -> tuple[int, Any]:
        status, decoded, content_type = call(self.app, method, path, body, **query)
        assert content_type.startswith("application/vnd.schemaregistry.v1+json")
        return status, decoded

    def register(self, subject: str, schema: str, **extra: Any) -> tuple[int, Any]:
        return self("POST", f"/subjects/{subject}/versions", {"schema": schema, **extra})


@pytest.fixture
def reg() -> Registry:
    return Registry()


def test_register_read_and_share_ids(reg: Registry) -> None:
    assert reg.register("a-value", V1) == (200, {"id": 1})
    assert reg.register("a-value", V1) == (200, {"id": 1})  # registering again adds no version
    assert reg.register("b-value", V1) == (200, {"id": 1})  # same schema, another subject: same id
    assert reg.register("a-value", V2) == (200, {"id": 2})
    assert reg("GET", "/subjects") == (200, ["a-value", "b-value"])
    assert reg("GET", "/subjects", offset=1, limit=5) == (200, ["b-value"])
    assert reg("GET", "/subjects", subjectPrefix="b") == (200, ["b-value"])
    assert [(s["subject"], s["version"]) for s in reg("GET", "/schemas", latestOnly=True)[1]] == [
        ("a-value", 2), ("b-value", 1)]
    assert reg("GET", "/subjects/a-value/versions") == (200, [1, 2])
    status, latest = reg("GET", "/subjects/a-value/versions/latest")
    assert status == 200 and set(latest) == {"subject", "version", "id", "schema"}
    assert (latest["version"], latest["id"]) == (2, 2)
    assert reg("GET", "/subjects/a-value/versions/-1")[1] == latest
    status, by_id = reg("GET", "/schemas/ids/1")
    assert status == 200 and set(by_id) == {"schema"} and json.loads(by_id["schema"])["name"] == "User"
    assert reg("GET", "/schemas/ids/1/subjects") == (200, ["a-value", "b-value"])
    assert reg("GET", "/schemas/ids/1/versions") == (200, [{"subject": "a-value", "version": 1},
                                                           {"subject": "b-value", "version": 1}])
    status, text, _ = call(reg.app, "GET", "/subjects/a-value/versions/1/schema")
    assert status == 200 and text["name"] == "User"
    status, found = reg("POST", "/subjects/b-value", {"schema": V1})
    assert status == 200 and (found["subject"], found["version"], found["id"]) == ("b-value", 1, 1)
    assert reg("GET", "/schemas/ids/1", fetchMaxId=True)[1]["maxId"] == 2
    assert "AVRO" in reg("GET", "/schemas/types")[1]


def test_incompatible_schema_is_refused_with_409(reg: Registry) -> None:
    reg.register("s", V1)
    status, error = reg.register("s", BREAKS)
    assert status == 409 and error["error_code"] == 40901
    assert error["message"].startswith("Schema being registered is incompatible with an earlier schema for subject")
    status, verdict = reg("POST", "/compatibility/subjects/s/versions/latest", {"schema": BREAKS}, verbose=True)
    assert status == 200 and verdict["is_compatible"] is False and verdict["messages"]
    assert reg("POST", "/compatibility/subjects/s/versions", {"schema": V2}) == (200, {"is_compatible": True})
    assert reg("PUT", "/config/s", {"compatibility": "none"}) == (200, {"compatibility": "NONE"})
    assert reg.register("s", BREAKS) == (200, {"id": 2})


def test_errors_carry_confluent_codes(reg: Registry) -> None:
    reg.register("s", V1)
    assert reg("GET", "/subjects/nope/versions")[1]["error_code"] == 40401
    status, error = reg("GET", "/subjects/s/versions/7")
    assert (status, error["error_code"]) == (404, 40402)
    assert reg("GET", "/subjects/s/versions/zero")[1]["error_code"] == 42202
    assert reg("GET", "/schemas/ids/99")[1]["error_code"] == 40403
    assert reg("POST", "/subjects/s", {"schema": OTHER})[1]["error_code"] == 40403
    status, error = reg.register("s", "{not avro")
    assert (status, error["error_code"]) == (422, 42201)
    status, error = reg.register("s", V2, schemaType="XML")
    assert (status, error["error_code"]) == (422, 42201)
    status, error = reg("PUT", "/config", {"compatibility": "SIDEWAYS"})
    assert (status, error["error_code"]) == (422, 42203)
    status, error = reg("PUT", "/mode", {"mode": "SOMETIMES"})
    assert (status, error["error_code"]) == (422, 42204)
    status, decoded, _ = call(reg.app, "POST", "/subjects/s/versions", raw=b"{nope")
    assert status == 400 and decoded["error_code"] == 50005
    assert reg("GET", "/config/s")[1]["error_code"] == 40408
    assert reg("GET", "/mode/s")[1]["error_code"] == 40409


def test_soft_then_permanent_delete(reg: Registry) -> None:
    reg.register("s", V1)
    reg.register("s", V2)
    assert reg("DELETE", "/subjects/s/versions/1", permanent=True)[1]["error_code"] == 40407
    assert reg("DELETE", "/subjects/s/versions/1") == (200, 1)
    assert reg("DELETE", "/subjects/s/versions/1")[1]["error_code"] == 40406
    assert reg("GET", "/subjects/s/versions") == (200, [2])
    assert reg("GET", "/subjects/s/versions", deleted=True) == (200, [1, 2])
    assert reg("GET", "/subjects/s/versions/1", deleted=True)[0] == 200
    assert reg("DELETE", "/subjects/s", permanent=True)[1]["error_code"] == 40405
    assert reg("DELETE", "/subjects/s") == (200, [2])
    assert reg("DELETE", "/subjects/s")[1]["error_code"] == 40404
    assert reg("GET", "/subjects") == (200, [])
    assert reg("GET", "/subjects", deleted=True) == (200, ["s"])
    assert reg("GET", "/subjects", deletedOnly=True) == (200, ["s"])
    assert reg.register("s", V1) == (200, {"id": 1})  # the id of the same schema; versions count on
    assert reg("GET", "/subjects/s/versions") == (200, [3])
    reg("DELETE", "/subjects/s")
    assert reg("DELETE", "/subjects/s", permanent=True) == (200, [1, 2, 3])
    assert reg("GET", "/subjects", deleted=True) == (200, [])
    assert reg("GET", "/schemas/ids/1")[1]["error_code"] == 40403


def test_references_block_deletes(reg: Registry) -> None:
    reg.register("order", OTHER)
    wrapper = json.dumps({"type": "record", "name": "Wrapper", "fields": [{"name": "order", "type": "Order"}]})
    refs = [{"name": "Order", "subject": "order", "version": 1}]
    assert reg.register("wrapper", wrapper, references=refs) == (200, {"id": 2})
    status, held = reg("GET", "/subjects/wrapper/versions/1")
    assert held["references"] == refs
    assert reg("GET", "/subjects/order/versions/1/referencedby") == (200, [2])
    status, error = reg("DELETE", "/subjects/order/versions/1")
    assert (status, error["error_code"]) == (422, 42206)
    missing = [{"name": "Order", "subject": "order", "version": 9}]
    assert reg.register("w2", wrapper, references=missing)[1]["error_code"] == 42201


def test_modes_and_import(reg: Registry) -> None:
    reg.register("s", V1)
    assert reg("PUT", "/mode", {"mode": "IMPORT"})[1]["error_code"] == 42205  # not empty
    assert reg("PUT", "/mode/fresh", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    assert reg.register("fresh", OTHER, id=40, version=3) == (200, {"id": 40})
    assert reg("GET", "/subjects/fresh/versions/3")[1]["id"] == 40
    assert reg.register("s", V2, id=41)[1]["error_code"] == 42205  # not importing
    assert reg.register("fresh", V1, id=40)[1]["error_code"] == 42207  # id taken by another schema
    assert reg.register("s", V2)[1] == {"id": 41}  # allocation continues past imported ids
    assert reg("PUT", "/mode/s", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert reg.register("s", OTHER)[1]["error_code"] == 42205
    assert reg("DELETE", "/mode/s") == (200, {"mode": "READONLY"})
    assert reg("GET", "/mode/s", defaultToGlobal=True) == (200, {"mode": "READWRITE"})


def test_config_levels(reg: Registry) -> None:
    assert reg("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert reg("PUT", "/config", {"compatibility": "FULL"}) == (200, {"compatibility": "FULL"})
    assert reg("GET", "/config/x", defaultToGlobal=True) == (200, {"compatibilityLevel": "FULL"})
    assert reg("PUT", "/config/x", {"compatibility": "FORWARD_TRANSITIVE"})[0] == 200
    assert reg("GET", "/config/x") == (200, {"compatibilityLevel": "FORWARD_TRANSITIVE"})
    assert reg("DELETE", "/config/x") == (200, {"compatibilityLevel": "FORWARD_TRANSITIVE"})
    assert reg("DELETE", "/config") == (200, {"compatibilityLevel": "FULL"})
    assert reg("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert reg("GET", "/contexts") == (200, ["."])
    assert reg("GET", "/") == (200, {})
    assert reg("GET", "/v1/metadata/id")[1]["scope"]["clusters"]["kafka-cluster"] == "c1"


def test_replay_rebuilds_the_same_state(reg: Registry) -> None:
    reg.register("a", V1)
    reg.register("a", V2)
    reg.register("b", OTHER)
    reg("DELETE", "/subjects/a/versions/1")
    reg("PUT", "/config/b", {"compatibility": "NONE"})
    reg("DELETE", "/subjects/b")
    replayed = reg.store.replayed()
    live = reg.core.state
    assert list(replayed.all_versions()) == list(live.all_versions())
    assert replayed.max_id == live.max_id == 3
    assert replayed.compatibility("b") == "NONE"
    keys = [json.loads(k) for k, _ in reg.store.log]
    assert keys[0] == {"keytype": "SCHEMA", "subject": "a", "version": 1, "magic": 1}
    assert {"keytype": "DELETE_SUBJECT", "subject": "b", "magic": 0} in keys
    first = json.loads(reg.store.log[0][1] or b"")
    assert set(first) == {"subject", "version", "id", "schema", "deleted"}  # no schemaType for AVRO


def test_protobuf_schema_sent_as_a_serialized_descriptor(reg: Registry) -> None:
    import base64

    proto = 'syntax = "proto3";\npackage p;\n\nmessage M {\n  string a = 1;\n}\n'
    assert reg.register("m", proto, schemaType="PROTOBUF") == (200, {"id": 1})
    status, held = reg("GET", "/subjects/m/versions/1", format="serialized")
    assert status == 200 and held["schemaType"] == "PROTOBUF"
    serialized = held["schema"]
    base64.b64decode(serialized, validate=True)
    # The same schema registered in serialized form is the same schema: same id, no new version.
    assert reg.register("m", serialized, schemaType="PROTOBUF") == (200, {"id": 1})
    assert reg("GET", "/schemas/ids/1", format="serialized")[1]["schema"] == serialized
    assert "message M" in reg("GET", "/schemas/ids/1")[1]["schema"]


def test_unreadable_records_are_skipped_on_replay() -> None:
    from moldau.registry.state import RegistryState

    state = RegistryState()
    state.apply(b"not json", b"{}", 0)
    state.apply(b'{"keytype":"SOMETHING","magic":0}', b"{}", 1)
    state.apply(b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"subject":"s"}', 2)
    state.apply(b'{"keytype":"NOOP","magic":0}', None, 3)
    assert state.subjects(deleted=True) == [] and state.end_offset == 4


def test_lookup_for_record_checks(reg: Registry) -> None:
    import asyncio

    from moldau.registry.lookup import SchemaLookup

    lookup = SchemaLookup(reg.core.parsed, reg.store)
    reg.register("a-value", V1)
    reg.register("a-value", V2)
    first = lookup.schema_by_id(1)
    assert first is not None and first.schema_type == "AVRO" and first.record_name() == "User"
    assert lookup.schema_by_id(1) is first  # cached
    assert lookup.subject_has_id("a-value", 1) and not lookup.subject_has_id("b-value", 1)
    reg("DELETE", "/subjects/a-value/versions/1")
    assert not lookup.subject_has_id("a-value", 1) and lookup.subject_has_id("a-value", 2)
    assert lookup.schema_by_id(99) is None
    assert asyncio.run(lookup.fresh_schema_by_id(2)) is not None
    assert asyncio.run(lookup.fresh_schema_by_id(99)) is None


def test_oversized_bodies_are_refused(reg: Registry) -> None:
    from moldau.registry.http.api import MAX_BODY_BYTES

    status, error, _ = call(reg.app, "POST", "/subjects/s/versions", raw=b" " * (MAX_BODY_BYTES + 1))
    assert (status, error["error_code"]) == (413, 413)


def test_normalize_matches_schemas_written_differently(reg: Registry) -> None:
    reordered = json.dumps({"fields": [{"type": "string", "name": "name"}], "name": "User", "type": "record"})
    assert reg.register("n", V1) == (200, {"id": 1})
    status, found = reg("POST", "/subjects/n", {"schema": reordered}, normalize=True)
    assert status == 200 and found["version"] == 1
    assert reg("POST", "/subjects/n/versions", {"schema": reordered}, normalize=True) == (200, {"id": 1})
    assert reg("GET", "/subjects/n/versions") == (200, [1])
