"""Pass-through source tasks, a Moldau extension of Kafka Connect's `SourceTask` for tasks whose records are
Kafka records already, as bytes: MirrorMaker 2's source task reads them with a consumer and returns them
unchanged.

When such a connector has no transforms and its converters hand bytes on unchanged (ByteArrayConverter for keys
and values, ByteArrayConverter or SimpleHeaderConverter for headers: MirrorMaker 2's settings), the worker asks
the task for the consumed messages themselves (`poll_messages`) and produces each as it is, to the topic
`destination` names and the same partition number. A `SourceRecord`, three conversions and the offset
bookkeeping per record would cost more than the copy itself. The Connect guarantees stay: a source offset is
committed only once its record and every record polled before it from the same source partition are
acknowledged, and the task hears of acknowledged records per run (`commit_run`) instead of per record. With a
transform or any other converter configured, the worker calls `poll` as for every other task.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Message

from moldau.connect.api import RecordMetadata, SourceTask

__all__ = ["PassthroughSourceTask"]


class PassthroughSourceTask(SourceTask):
    @abstractmethod
    def poll_messages(self) -> Sequence[Message] | None:
        """The next consumed messages (none carrying an error), the records `poll` would have returned."""

    @abstractmethod
    def destination(self, topic: str) -> str:
        """The topic a record of the source's `topic` is written to (in the partition of the same number)."""

    @abstractmethod
    def source_partition(self, topic: str, partition: int) -> Mapping[str, Any]:
        """The Connect source partition of the source's `topic`-`partition`."""

    @abstractmethod
    def source_offset(self, offset: int) -> Mapping[str, Any]:
        """The Connect source offset of the record at `offset`."""

    def max_run(self) -> int:
        """The most records a run may hold: the task learns exactly where the first and the last record of each
        run were written, so a task that needs that finer asks for shorter runs. Default: one poll's worth."""
        return 2**31

    def commit_run(self, topic: str, partition: int, first: int, last: int, count: int,
                   first_written: RecordMetadata, last_written: RecordMetadata) -> None:
        """`count` records of the source's `topic`-`partition`, offsets `first` to `last`, polled together, were
        all acknowledged; the metadata say where the first and the last of them were written. The pass-through
        path calls this instead of `commit_record` for each record."""
