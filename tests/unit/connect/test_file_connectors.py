"""FileStreamSource and FileStreamSink tasks on real files, with the worker's offset reader."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from moldau.connect.api import OffsetStorageReader, SinkRecord, SinkTaskContext, SourceTaskContext, TopicPartition
from moldau.connect.connectors.file import (
    FileStreamSinkConnector,
    FileStreamSinkTask,
    FileStreamSourceConnector,
    FileStreamSourceTask,
)
from moldau.connect.data import (
    BOOLEAN_SCHEMA,
    INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
    Struct,
)
from moldau.connect.errors import ConfigException


class Offsets(OffsetStorageReader):
    def __init__(self, offsets: dict[str, dict[str, Any]]) -> None:
        self.offsets_by_file = offsets

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.offsets_by_file.get(partition["filename"])


def _source(path: Path, offsets: dict[str, dict[str, Any]], batch: int = 2000) -> FileStreamSourceTask:
    task = FileStreamSourceTask()
    props = {"file": str(path), "topic": "lines", "batch.size": str(batch)}
    task.initialize(SourceTaskContext(props, Offsets(offsets)))
    task.start(props)
    return task


def test_source_reads_lines_with_positions_and_waits_for_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes("one\ntwo é\nthr".encode())
    task = _source(path, {}, batch=10)
    records = task.poll() or []
    assert [r.value for r in records] == ["one", "two é"]
    assert records[0].value_schema == STRING_SCHEMA and records[0].topic == "lines" and records[0].key is None
    assert [r.source_offset for r in records] == [{"position": 4}, {"position": 11}]
    assert records[1].source_partition == {"filename": str(path)}
    assert not task.poll()  # "thr" is not a whole line yet
    with open(path, "ab") as file:
        file.write(b"ee\n")
    assert [r.value for r in task.poll() or []] == ["three"]
    task.stop()
    assert task.poll() is None


def test_source_resumes_at_the_committed_position(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("a\nb\nc\n")
    task = _source(path, {str(path): {"position": 2}})
    assert [r.value for r in task.poll() or []] == ["b", "c"]
    task.stop()


def test_source_batch_size_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "later.txt"
    task = _source(path, {}, batch=2)
    assert not task.poll()  # no file yet
    path.write_text("1\n2\n3\n")
    assert [r.value for r in task.poll() or []] == ["1", "2"]
    assert [r.value for r in task.poll() or []] == ["3"]
    task.stop()


def test_source_connector_config() -> None:
    connector = FileStreamSourceConnector()
    with pytest.raises(ConfigException) as raised:
        connector.start({"file": "x"})
    assert raised.value.name == "topic"
    connector.start({"file": "x", "topic": "t"})
    assert connector.task_configs(4) == [{"file": "x", "topic": "t", "batch.size": "2000"}]


def test_sink_appends_values_and_flushes(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    connector = FileStreamSinkConnector()
    connector.start({"file": str(path), "topics": "t"})
    task = FileStreamSinkTask()
    task.initialize(SinkTaskContext(connector.task_configs(1)[0]))
    task.start(connector.task_configs(1)[0])
    task.put([SinkRecord(topic="t", value="x", kafka_offset=0), SinkRecord(topic="t", value=b"y", kafka_offset=1),
              SinkRecord(topic="t", value=3, kafka_offset=2)])
    task.flush({TopicPartition("t", 0): 3})
    assert path.read_text() == "x\ny\n3\n"
    task.stop()


def test_sink_writes_values_as_kafka_connect_prints_them(tmp_path: Path) -> None:
    """Kafka's FileStreamSink writes each value's Java toString(): a file it wrote and one Moldau wrote match."""
    path = tmp_path / "out.txt"
    schema = (SchemaBuilder.struct().field("id", INT32_SCHEMA).field("name", OPTIONAL_STRING_SCHEMA)
              .field("ok", BOOLEAN_SCHEMA).build())
    task = FileStreamSinkTask()
    task.start({"file": str(path)})
    task.put([SinkRecord(topic="t", value=Struct(schema).put("id", 1).put("name", "a").put("ok", True), kafka_offset=0),
              SinkRecord(topic="t", value=Struct(schema).put("id", 2).put("ok", False), kafka_offset=1),
              SinkRecord(topic="t", value={"a": 1, "b": [True, None]}, kafka_offset=2),
              SinkRecord(topic="t", value=None, kafka_offset=3)])
    task.flush({TopicPartition("t", 0): 4})
    assert path.read_text().splitlines() == [
        "Struct{id=1,name=a,ok=true}", "Struct{id=2,ok=false}", "{a=1, b=[true, null]}", "null"]
    task.stop()
