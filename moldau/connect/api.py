"""The plugin API: what connectors, tasks, converters and transforms implement, with Kafka Connect's shapes.

Records (`SourceRecord`, `SinkRecord`) are immutable; transforms derive changed copies with `new_record`.
Connectors and tasks are synchronous objects: the worker calls them from its own threads, so a task may block
on I/O (a file, a database) without stalling anything else. A source task's `poll` returns the records it has
(or None/[] when it has none yet; it may block briefly); a sink task's `put` receives batches and `flush` is
called before the worker commits consumer offsets.

Plugins are found by the registry in `moldau.connect.plugins`: every concrete subclass of `Connector`,
`Converter`, `HeaderConverter`, `Transformation` or `Predicate` defined in a module of the built-in packages
(`moldau.connect.connectors`, `moldau.connect.converters`, `moldau.connect.transforms`), exposed through the
`moldau.connect.plugins` entry point group, or in a module under a `plugin.path` directory. A class is known by
its qualified Python name, its class name, and the names in its `aliases` class attribute (Kafka's class names,
e.g. `org.apache.kafka.connect.storage.StringConverter`).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

from moldau.connect.config import ConfigDef, ConfigValue
from moldau.connect.data import Schema, SchemaAndValue

__all__ = [
    "ConnectRecord", "Connector", "ConnectorContext", "ConnectorTransactionBoundaries", "Converter",
    "ExactlyOnceSupport", "Header", "HeaderConverter",
    "OffsetStorageReader", "Plugin", "Predicate", "RecordMetadata", "SinkConnector", "SinkRecord", "SinkTask",
    "SinkTaskContext", "SourceConnector", "SourceRecord", "SourceTask", "SourceTaskContext", "Task",
    "TopicPartition", "TransactionContext", "Transformation",
]

R = TypeVar("R", bound="ConnectRecord")


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclasses.dataclass(frozen=True)
class Header:
    """One record header: a key and a value with its (optional) schema."""

    key: str
    value: Any
    schema: Schema | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConnectRecord:
    """What every record has: topic, partition (None: let the producer choose), key and value with their
    schemas, timestamp (ms since the epoch, or None) and headers."""

    topic: str
    kafka_partition: int | None = None
    key_schema: Schema | None = None
    key: Any = None
    value_schema: Schema | None = None
    value: Any = None
    timestamp: int | None = None
    headers: tuple[Header, ...] = ()

    def new_record(self: R, **changes: Any) -> R:
        """A copy of this record with `changes` applied (any field name), of the same class."""
        if "headers" in changes:
            changes["headers"] = tuple(changes["headers"])
        return dataclasses.replace(self, **changes)

    def header(self, key: str) -> Header | None:
        """The last header called `key` (Kafka's `lastWithName`), or None."""
        return next((h for h in reversed(self.headers) if h.key == key), None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SourceRecord(ConnectRecord):
    """A record from a source task; `source_partition`/`source_offset` say where in the source it came from
    (e.g. `{"filename": ...}` / `{"position": ...}`) and are committed once the record is acknowledged."""

    source_partition: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    source_offset: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SinkRecord(ConnectRecord):
    """A record consumed for a sink task, with its offset in the topic partition."""

    kafka_offset: int = -1
    timestamp_type: str = "CreateTime"  # NoTimestampType, CreateTime or LogAppendTime


class RecordMetadata(NamedTuple):
    """Where an acknowledged source record was written."""

    topic: str
    partition: int
    offset: int


class Plugin:
    """What every plugin class may declare: `aliases` (extra names, such as Kafka's class names)."""

    aliases: ClassVar[tuple[str, ...]] = ()

    def version(self) -> str:
        from moldau import __version__
        return __version__

    def config_def(self) -> ConfigDef:
        """The plugin's own configs (none unless it says so)."""
        return ConfigDef()


# --- connectors ------------------------------------------------------------------------------------------


class ConnectorContext(ABC):
    """What the worker offers a connector."""

    @abstractmethod
    def request_task_reconfiguration(self) -> None:
        """Ask the worker to call `task_configs` again and restart the tasks if their configs changed."""

    @abstractmethod
    def raise_error(self, error: BaseException) -> None:
        """Fail the connector with `error` (from a connector's own background thread)."""


class Connector(Plugin, ABC):
    """A connector: validates its config, splits the work into task configs, and names its task class."""

    context: ConnectorContext | None = None

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    @abstractmethod
    def start(self, props: Mapping[str, str]) -> None:
        """Start with the connector's config (string values, as given by the user)."""

    @abstractmethod
    def task_class(self) -> type[Task]: ...

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """At most `max_tasks` configs, one per task to run."""

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def config_def(self) -> ConfigDef: ...

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        """Per-key validation results for `props`; override to add cross-key checks."""
        return self.config_def().validate(props)


class ExactlyOnceSupport(Enum):
    """A source connector's answer to whether it can give exactly-once delivery with a config (KIP-618)."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorTransactionBoundaries(Enum):
    """Whether a source connector can define its own transaction boundaries (KIP-618)."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class SourceConnector(Connector, ABC):
    """A connector whose tasks read from an external system into topics."""

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """Whether the connector's tasks, configured with `props`, can be resumed exactly where their committed
        offsets say (their source can be re-read from an offset). None: the connector does not say, which
        `exactly.once.support=required` refuses, as Kafka does."""
        return None

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.UNSUPPORTED


class SinkConnector(Connector, ABC):
    """A connector whose tasks write records from topics (`topics` or `topics.regex`) to an external system."""

    TOPICS_CONFIG: ClassVar[str] = "topics"
    TOPICS_REGEX_CONFIG: ClassVar[str] = "topics.regex"


# --- tasks -----------------------------------------------------------------------------------------------


class Task(Plugin, ABC):
    @abstractmethod
    def start(self, props: Mapping[str, str]) -> None:
        """Start with this task's config (one of the connector's `task_configs`)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop; called from another thread than `poll`/`put` may be running in, so only signal there."""


class OffsetStorageReader(ABC):
    """Read access to the committed source offsets of this connector."""

    @abstractmethod
    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        """The last committed offset of the source partition, or None."""

    def offsets(self, partitions: Sequence[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], dict[str, Any]]]:
        """(partition, offset) for each of `partitions` that has a committed offset."""
        found = []
        for partition in partitions:
            offset = self.offset(partition)
            if offset is not None:
                found.append((partition, offset))
        return found


class TransactionContext(ABC):
    """A source task's say over its transactions when its connector defines their boundaries (KIP-618: a worker
    with `exactly.once.source.support=enabled`, a connector with `transaction.boundary=connector` whose
    `can_define_transaction_boundaries` answers SUPPORTED). Nothing is committed unless the task asks; a task
    stopped in good order commits what is open."""

    @abstractmethod
    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        """Commit the open transaction once the records of the current `poll` (or, given, once `record`, which
        it then ends with) are dispatched: their offsets are committed with them."""

    @abstractmethod
    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        """Abort the open transaction once the records of the current `poll` (or `record`, which it includes)
        are dispatched: no consumer reading committed records sees them, and their offsets are not committed."""


class SourceTaskContext:
    """What the worker offers a source task: its config, the committed offsets and, with connector-defined
    transaction boundaries, its transactions."""

    def __init__(self, configs: Mapping[str, str], offset_storage_reader: OffsetStorageReader,
                 transaction_context: TransactionContext | None = None) -> None:
        self._configs = dict(configs)
        self.offset_storage_reader = offset_storage_reader
        self._transaction_context = transaction_context

    def configs(self) -> dict[str, str]:
        return dict(self._configs)

    def transaction_context(self) -> TransactionContext | None:
        """Kafka's `transactionContext()`: None unless the connector defines transaction boundaries on a worker
        with exactly-once source support enabled."""
        return self._transaction_context


class SourceTask(Task, ABC):
    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    @abstractmethod
    def poll(self) -> list[SourceRecord] | None:
        """The next records, or None/[] if there are none now. May block for a short while."""

    def commit(self) -> None:
        """Called after the worker committed the offsets of acknowledged records."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """Called once per record after it was acknowledged (metadata None: a transform dropped it)."""


class SinkTaskContext:
    """What the worker offers a sink task. Requests (offset resets, pause/resume, commit) are recorded here
    and carried out by the worker's consumer loop between calls to `put`."""

    def __init__(self, configs: Mapping[str, str]) -> None:
        self._configs = dict(configs)
        self._assignment: set[TopicPartition] = set()
        self.requested_offsets: dict[TopicPartition, int] = {}
        self.requested_pause: set[TopicPartition] = set()
        self.requested_resume: set[TopicPartition] = set()
        self.commit_requested = False
        self.timeout_ms: int | None = None

    def configs(self) -> dict[str, str]:
        return dict(self._configs)

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def set_assignment(self, partitions: set[TopicPartition]) -> None:
        """Called by the worker when the consumer's assignment changes."""
        self._assignment = set(partitions)

    def offset(self, partition: TopicPartition | Mapping[TopicPartition, int], offset: int | None = None) -> None:
        """Rewind or skip: consume `partition` from `offset` next (or a map of them)."""
        if isinstance(partition, TopicPartition):
            if offset is None:
                raise ValueError("an offset is required with a single partition")
            self.requested_offsets[partition] = offset
        else:
            self.requested_offsets.update(partition)

    def timeout(self, timeout_ms: int) -> None:
        """After a RetriableException from `put`, redeliver the batch after `timeout_ms`."""
        self.timeout_ms = timeout_ms

    def pause(self, *partitions: TopicPartition) -> None:
        self.requested_pause.update(partitions)
        self.requested_resume.difference_update(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.requested_resume.update(partitions)
        self.requested_pause.difference_update(partitions)

    def request_commit(self) -> None:
        self.commit_requested = True


class SinkTask(Task, ABC):
    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        """The consumer was assigned `partitions`; set up writers for them."""

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        """`partitions` were revoked; drop their writers (a flush came first)."""

    @abstractmethod
    def put(self, records: Sequence[SinkRecord]) -> None:
        """Write (or buffer) a batch of records."""

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Make everything `put` so far durable; `current_offsets` are the next offsets to consume."""

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The offsets safe to commit (default: flush, then all of `current_offsets`)."""
        self.flush(current_offsets)
        return dict(current_offsets)


# --- converters and transforms --------------------------------------------------------------------------


class Converter(Plugin, ABC):
    """Turns Connect data into a record key or value's bytes and back."""

    @abstractmethod
    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        """`configs` are the converter's properties with their prefix removed (e.g. `schemas.enable`)."""

    @abstractmethod
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Sequence[Header] = ()) -> bytes | None: ...

    @abstractmethod
    def to_connect_data(self, topic: str, data: bytes | None,
                        headers: Sequence[Header] = ()) -> SchemaAndValue: ...

    def config_def(self) -> ConfigDef:
        return ConfigDef()


class HeaderConverter(Plugin, ABC):
    """Turns one header value into bytes and back (Kafka's `header.converter`)."""

    @abstractmethod
    def configure(self, configs: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None: ...

    @abstractmethod
    def to_connect_header(self, topic: str, key: str, data: bytes | None) -> SchemaAndValue: ...

    def config_def(self) -> ConfigDef:
        return ConfigDef()


class Transformation(Plugin, ABC, Generic[R]):
    """A single message transform: returns the changed record, or None to drop it."""

    @abstractmethod
    def configure(self, configs: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def apply(self, record: R) -> R | None: ...

    @abstractmethod
    def config_def(self) -> ConfigDef: ...

    def close(self) -> None:
        """Release what `configure` acquired."""


class Predicate(Plugin, ABC, Generic[R]):
    """A condition on records, for applying a transform only to some (`transforms.X.predicate`)."""

    @abstractmethod
    def configure(self, configs: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def test(self, record: R) -> bool: ...

    @abstractmethod
    def config_def(self) -> ConfigDef: ...

    def close(self) -> None:
        """Release what `configure` acquired."""
