"""Pure pieces of the worker: restart plans, offset tracking, stores, worker and connector configs,
converters."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.connect.converters.simple import ByteArrayConverter, SimpleHeaderConverter, StringConverter
from moldau.connect.data import OPTIONAL_STRING_SCHEMA
from moldau.connect.errors import ConfigException, DataException
from moldau.connect.worker.states import State, Status, restart_plan
from moldau.connect.worker.stores import FileOffsetStore, MemoryStatusStore
from moldau.connect.worker.submitted import SubmittedRecords, partition_key
from moldau.connect.worker.worker_config import WorkerConfig, load_connector_file

RUNNING = Status(State.RUNNING, "w")
FAILED = Status(State.FAILED, "w", "trace")


@pytest.mark.parametrize(("connector", "include", "only_failed", "restarts_connector", "tasks"), [
    (RUNNING, False, False, True, ()),
    (RUNNING, True, False, True, (0, 1)),
    (RUNNING, True, True, False, (1,)),
    (FAILED, False, True, True, ()),
    (RUNNING, False, True, False, ()),
])
def test_restart_plan(connector: Status, include: bool, only_failed: bool, restarts_connector: bool,
                      tasks: tuple[int, ...]) -> None:
    plan = restart_plan(connector, {0: RUNNING, 1: FAILED}, include, only_failed)
    assert plan.connector is restarts_connector and plan.tasks == tasks


def test_status_json_carries_the_trace_only_when_failed() -> None:
    assert RUNNING.json() == {"state": "RUNNING", "worker_id": "w"}
    assert FAILED.json() == {"state": "FAILED", "worker_id": "w", "trace": "trace"}


def test_offsets_commit_only_acknowledged_prefixes() -> None:
    submitted = SubmittedRecords()
    a = {"file": "a"}
    first, second, third = (submitted.submit(a, {"position": p}) for p in (1, 2, 3))
    other = submitted.submit({"file": "b"}, {"position": 9})
    SubmittedRecords.ack(second)
    SubmittedRecords.ack(other)
    ready = submitted.committable()
    assert list(ready.values()) == [({"file": "b"}, {"position": 9})]  # a's first record is still in flight
    SubmittedRecords.ack(first)
    assert submitted.committable() == {partition_key(a): (a, {"position": 2})}
    assert submitted.pending() == 1
    SubmittedRecords.ack(third)
    assert submitted.committable()[partition_key(a)][1] == {"position": 3}
    assert submitted.pending() == 0 and submitted.committable() == {}


def test_file_offset_store_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "offsets.json"
    store = FileOffsetStore(path)
    partition = {"filename": "/data/in.txt"}
    store.put("src", {partition_key(partition): (partition, {"position": 42})})
    store.put("other", {partition_key(partition): (partition, {"position": 1})})
    reopened = FileOffsetStore(path)
    assert reopened.get("src", partition) == {"position": 42}
    assert reopened.offsets("src") == [(partition, {"position": 42})]
    reopened.put("src", {partition_key(partition): (partition, None)})
    assert FileOffsetStore(path).get("src", partition) is None
    assert FileOffsetStore(path).get("other", partition) == {"position": 1}


def test_status_store_forgets_removed_tasks() -> None:
    store = MemoryStatusStore()
    for task in range(3):
        store.put_task("c", task, RUNNING)
    store.remove_tasks("c", keep=1)
    assert list(store.tasks("c")) == [0]


def test_worker_config() -> None:
    worker = WorkerConfig.parse({"bootstrap.servers": "a:1, b:2", "key.converter": "StringConverter",
                                 "value.converter": "StringConverter", "offset.storage.file.filename": "o",
                                 "listeners": "http://127.0.0.1:18083", "producer.linger.ms": "50",
                                 "security.protocol": "SSL"})
    assert worker.bootstrap_servers == "a:1,b:2" and worker.rest_listeners()[0].port == 18083
    assert worker.worker_id() == "127.0.0.1:18083"
    assert worker.values["offset.flush.interval.ms"] == 60000
    assert worker.client_config("producer") == {"bootstrap.servers": "a:1,b:2", "security.protocol": "SSL",
                                                "linger.ms": "50"}
    with pytest.raises(ConfigException) as raised:
        WorkerConfig.parse({"key.converter": "x", "value.converter": "x"})
    assert raised.value.name == "offset.storage.file.filename"
    listeners = WorkerConfig.parse({"key.converter": "x", "value.converter": "x",
                                    "offset.storage.file.filename": "o"}).rest_listeners()
    assert [(u.scheme, u.host, u.port) for u in listeners] == [("http", "0.0.0.0", 8083)]


def test_connector_files(tmp_path: Path) -> None:
    (tmp_path / "a.properties").write_text("name=a\nconnector.class=FileStreamSource\ntopic=t\n")
    (tmp_path / "b.json").write_text('{"name": "b", "config": {"connector.class": "X", "tasks.max": 2}}')
    (tmp_path / "c.json").write_text('{"name": "c", "connector.class": "X", "errors.log.enable": true}')
    assert load_connector_file(tmp_path / "a.properties")["topic"] == "t"
    assert load_connector_file(tmp_path / "b.json") == {"connector.class": "X", "tasks.max": "2", "name": "b"}
    assert load_connector_file(tmp_path / "c.json")["errors.log.enable"] == "true"


def test_string_and_bytes_converters() -> None:
    string = StringConverter()
    string.configure({}, is_key=False)
    assert string.from_connect_data("t", None, "é") == "é".encode()
    assert string.from_connect_data("t", None, 12) == b"12"
    assert string.from_connect_data("t", None, None) is None
    back = string.to_connect_data("t", "é".encode())
    assert back.schema == OPTIONAL_STRING_SCHEMA and back.value == "é"
    latin = StringConverter()
    latin.configure({"converter.encoding": "latin-1"}, is_key=True)
    assert latin.from_connect_data("t", None, "é") == b"\xe9"
    with pytest.raises(DataException):
        string.to_connect_data("t", b"\xff")
    raw = ByteArrayConverter()
    raw.configure({}, is_key=False)
    assert raw.from_connect_data("t", None, b"\x00") == b"\x00"
    assert raw.to_connect_data("t", b"\x01").value == b"\x01"
    with pytest.raises(DataException):
        raw.from_connect_data("t", None, "text")
    header = SimpleHeaderConverter()
    assert header.from_connect_header("t", "k", None, True) == b"true"
    assert header.to_connect_header("t", "k", b"v").value == "v"
    assert header.to_connect_header("t", "k", b"\xff").value == b"\xff"


def test_records_pass_through_only_with_byte_converters_no_transforms_and_a_task_that_can() -> None:
    from moldau.connect.converters.json import JsonConverter
    from moldau.connect.plugins import PluginRegistry
    from moldau.connect.transforms.chain import build_chain
    from moldau.connect.worker.passthrough import passthrough_applies
    from moldau.connect.worker.plugin_setup import Converters
    from moldau.mirror.checkpoint import MirrorCheckpointTask
    from moldau.mirror.source import MirrorSourceTask

    registry = PluginRegistry.discover(entry_points=False)
    no_transforms = build_chain({}, registry)
    a_transform = build_chain({"transforms": "route", "transforms.route.type": "RegexRouter",
                               "transforms.route.regex": "(.*)", "transforms.route.replacement": "copy-$1"}, registry)
    raw = Converters(ByteArrayConverter(), ByteArrayConverter(), SimpleHeaderConverter())
    assert passthrough_applies(MirrorSourceTask(), raw, no_transforms)
    assert passthrough_applies(MirrorSourceTask(), Converters(ByteArrayConverter(), ByteArrayConverter(),
                                                              ByteArrayConverter()), no_transforms)
    assert not passthrough_applies(MirrorSourceTask(), raw, a_transform)  # the transform must see records
    assert not passthrough_applies(MirrorSourceTask(), Converters(ByteArrayConverter(), JsonConverter(),
                                                                  SimpleHeaderConverter()), no_transforms)
    assert not passthrough_applies(MirrorCheckpointTask(), raw, no_transforms)  # returns SourceRecords only


def test_worker_clients_get_the_tls_stores_under_librdkafka_s_names() -> None:
    """A worker's top-level ssl.* configs name PEM stores as Kafka Connect does (they also secure an https REST
    listener); its Kafka clients get librdkafka's names for the same files, and no REST-only setting."""
    worker = WorkerConfig.parse({"key.converter": "x", "value.converter": "x", "offset.storage.file.filename": "o",
                                 "security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                 "ssl.truststore.location": "/ca.pem", "ssl.keystore.type": "PEM",
                                 "ssl.keystore.location": "/worker.pem", "ssl.client.auth": "required",
                                 "ssl.endpoint.identification.algorithm": ""})
    assert worker.client_config("consumer") == {
        "bootstrap.servers": "localhost:9092", "security.protocol": "SSL", "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/worker.pem", "ssl.key.location": "/worker.pem",
        "ssl.endpoint.identification.algorithm": "none"}
