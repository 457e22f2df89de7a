"""FileStreamSource and FileStreamSink, the file connectors Kafka ships, with their config names.

The source reads a text file line by line into `topic` (value: the line, STRING schema, no key). Its source
partition is `{"filename": <file>}` and its offset `{"position": <byte offset after the line>}`, so after a
restart it seeks to the committed position and goes on from the next line. It keeps reading as the file grows.
The sink appends each record's value, as text, as one line of `file` and flushes the file on `flush`. One
task each, as Kafka's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any

from moldau.connect.api import (
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
    TopicPartition,
)
from moldau.connect.config import ConfigDef, ConfigType, Importance, NonEmptyString, Range
from moldau.connect.data import STRING_SCHEMA, java_text
from moldau.connect.errors import ConnectException

__all__ = ["FileStreamSinkConnector", "FileStreamSinkTask", "FileStreamSourceConnector", "FileStreamSourceTask"]

log = logging.getLogger(__name__)

FILE_CONFIG = "file"
TOPIC_CONFIG = "topic"
TOPICS_CONFIG = "topics"
BATCH_SIZE_CONFIG = "batch.size"
DEFAULT_BATCH_SIZE = 2000
FILENAME_FIELD = "filename"
POSITION_FIELD = "position"
IDLE_WAIT_S = 0.2  # how long poll waits for the file to grow before returning nothing


class FileStreamSourceConnector(SourceConnector):
    aliases = ("org.apache.kafka.connect.file.FileStreamSourceConnector",)

    def __init__(self) -> None:
        self.props: dict[str, str] = {}

    def config_def(self) -> ConfigDef:
        return (ConfigDef()
                .define(FILE_CONFIG, ConfigType.STRING, None, Importance.HIGH,
                        "Source filename. If not specified, the standard input will be used")
                .define(TOPIC_CONFIG, ConfigType.STRING, importance=Importance.HIGH,
                        documentation="The topic to publish data to", validator=NonEmptyString())
                .define(BATCH_SIZE_CONFIG, ConfigType.INT, DEFAULT_BATCH_SIZE, Importance.LOW,
                        "The maximum number of records the source task can read from the file each time it is "
                        "polled", validator=Range.at_least(1)))

    def start(self, props: Mapping[str, str]) -> None:
        parsed = self.config_def().parse(props)
        self.props = {k: str(v) for k, v in parsed.items() if v is not None}

    def task_class(self) -> type[Task]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]  # one file, one reader

    def stop(self) -> None:
        pass


class FileStreamSourceTask(SourceTask):
    def __init__(self) -> None:
        self.filename: str | None = None
        self.topic = ""
        self.batch_size = DEFAULT_BATCH_SIZE
        self.stream: IO[bytes] | None = None
        self.position = 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()  # stop() closes the stream from another thread than poll() reads it in

    def start(self, props: Mapping[str, str]) -> None:
        self.filename = props.get(FILE_CONFIG) or None
        self.topic = props[TOPIC_CONFIG]
        self.batch_size = int(props.get(BATCH_SIZE_CONFIG, DEFAULT_BATCH_SIZE))
        self.position = 0
        if self.filename is not None:
            committed = self.context.offset_storage_reader.offset({FILENAME_FIELD: self.filename})
            if committed is not None:
                position = committed.get(POSITION_FIELD)
                if not isinstance(position, int):
                    raise ConnectException(f"offset position is the incorrect type: {position!r}")
                self.position = position

    def _open(self) -> IO[bytes] | None:
        if self.filename is None:
            import sys
            return sys.stdin.buffer
        try:
            stream = open(self.filename, "rb")  # noqa: SIM115 - kept open across polls, closed in stop()
        except FileNotFoundError:
            log.warning("FileStreamSource: %s does not exist yet; waiting for it", self.filename)
            return None
        stream.seek(self.position)
        log.info("FileStreamSource: reading %s from position %d", self.filename, self.position)
        return stream

    def poll(self) -> list[SourceRecord] | None:
        with self.lock:
            if self.stopping.is_set():
                return None
            if self.stream is None:
                self.stream = self._open()
            records = self._read_lines() if self.stream is not None else []
        if not records:
            self.stopping.wait(IDLE_WAIT_S)
        return records

    def _read_lines(self) -> list[SourceRecord]:
        assert self.stream is not None
        records: list[SourceRecord] = []
        while len(records) < self.batch_size:
            line = self.stream.readline()
            if not line.endswith(b"\n"):
                # A partial last line is read again once it is complete.
                if line:
                    self.stream.seek(self.position)
                break
            self.position += len(line)
            records.append(self._record(line.rstrip(b"\r\n").decode("utf-8", errors="replace")))
        return records

    def _record(self, text: str) -> SourceRecord:
        partition: dict[str, Any] = {FILENAME_FIELD: self.filename} if self.filename else {}
        offset: dict[str, Any] = {POSITION_FIELD: self.position} if self.filename else {}
        return SourceRecord(topic=self.topic, value_schema=STRING_SCHEMA, value=text,
                            source_partition=partition, source_offset=offset)

    def stop(self) -> None:
        self.stopping.set()
        with self.lock:
            if self.stream is not None and self.filename is not None:
                self.stream.close()
            self.stream = None


class FileStreamSinkConnector(SinkConnector):
    aliases = ("org.apache.kafka.connect.file.FileStreamSinkConnector",)

    def __init__(self) -> None:
        self.props: dict[str, str] = {}

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(FILE_CONFIG, ConfigType.STRING, None, Importance.HIGH,
                                  "Destination filename. If not specified, the standard output will be used")

    def start(self, props: Mapping[str, str]) -> None:
        self.config_def().parse(props)
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass


class FileStreamSinkTask(SinkTask):
    def __init__(self) -> None:
        self.stream: IO[str] | None = None
        self._owned = False

    def start(self, props: Mapping[str, str]) -> None:
        filename = props.get(FILE_CONFIG) or None
        if filename is None:
            import sys
            self.stream = sys.stdout
        else:
            self.stream = open(filename, "a", encoding="utf-8")  # noqa: SIM115 - closed in stop()
        self._owned = filename is not None

    def put(self, records: Sequence[SinkRecord]) -> None:
        assert self.stream is not None
        for record in records:
            self.stream.write(f"{java_text(record.value)}\n")

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        if self.stream is not None:
            self.stream.flush()
            if self._owned:
                import os
                os.fsync(self.stream.fileno())

    def stop(self) -> None:
        if self.stream is not None and self._owned:
            self.stream.close()
        self.stream = None
