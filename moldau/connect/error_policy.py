"""What to do when converting or transforming a record fails, as Kafka Connect's `errors.*` configs say.

`errors.tolerance=none` (the default) fails the task on the first error; `all` skips the record. With
`errors.log.enable` the error is logged (the record's coordinates too, and its contents with
`errors.log.include.messages`). A sink connector with `errors.deadletterqueue.topic.name` also sends the
consumed record's original key, value and headers to that topic, plus, with
`errors.deadletterqueue.context.headers.enable`, Kafka's `__connect.errors.*` headers saying where and why it
failed. Retriable errors (RetriableException) are retried for up to `errors.retry.timeout` ms with backoff
capped at `errors.retry.delay.max.ms`. Pure: the runtime performs the logging, producing and waiting.
"""

from __future__ import annotations

import enum
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moldau.connect.config import ConfigDef, ConfigType, Importance, Range, ValidString
from moldau.connect.errors import RetriableException

HEADER_PREFIX = "__connect.errors."
TOPIC = HEADER_PREFIX + "topic"
PARTITION = HEADER_PREFIX + "partition"
OFFSET = HEADER_PREFIX + "offset"
CONNECTOR = HEADER_PREFIX + "connector.name"
TASK = HEADER_PREFIX + "task.id"
STAGE = HEADER_PREFIX + "stage"
CLASS = HEADER_PREFIX + "class.name"
EXCEPTION = HEADER_PREFIX + "exception.class.name"
MESSAGE = HEADER_PREFIX + "exception.message"
STACKTRACE = HEADER_PREFIX + "exception.stacktrace"

RETRY_MIN_DELAY_MS = 300  # Kafka's first backoff step; each retry doubles it up to the configured maximum

CONFIG_DEF = (
    ConfigDef()
    .define("errors.retry.timeout", ConfigType.LONG, 0, Importance.MEDIUM,
            "The maximum duration in milliseconds that a failed operation will be reattempted. -1: forever.")
    .define("errors.retry.delay.max.ms", ConfigType.LONG, 60000, Importance.MEDIUM,
            "The maximum duration in milliseconds between consecutive retry attempts.",
            validator=Range.at_least(1))
    .define("errors.tolerance", ConfigType.STRING, "none", Importance.MEDIUM,
            "none: an error fails the task; all: problematic records are skipped.",
            validator=ValidString(("none", "all"), case_sensitive=False))
    .define("errors.log.enable", ConfigType.BOOLEAN, False, Importance.MEDIUM,
            "Log each error with its failed operation and the problematic record's coordinates.")
    .define("errors.log.include.messages", ConfigType.BOOLEAN, False, Importance.MEDIUM,
            "Also log the problematic record's key, value and headers.")
    .define("errors.deadletterqueue.topic.name", ConfigType.STRING, "", Importance.MEDIUM,
            "The topic to send records that failed conversion or transformation to (sink connectors only).")
    .define("errors.deadletterqueue.topic.replication.factor", ConfigType.SHORT, 3, Importance.MEDIUM,
            "Replication factor used to create the dead letter queue topic when it doesn't already exist.")
    .define("errors.deadletterqueue.context.headers.enable", ConfigType.BOOLEAN, False, Importance.MEDIUM,
            "Add __connect.errors.* headers describing the error to dead letter queue records.")
)


class Stage(enum.Enum):
    """Where in the pipeline an error happened (Kafka's names, as the stage header carries them)."""

    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"
    TASK_PUT = "TASK_PUT"
    TASK_POLL = "TASK_POLL"
    KAFKA_PRODUCE = "KAFKA_PRODUCE"
    KAFKA_CONSUME = "KAFKA_CONSUME"


# Kafka tolerates errors only where a single record is at fault; a failing put/poll fails the task.
TOLERABLE = frozenset({Stage.KEY_CONVERTER, Stage.VALUE_CONVERTER, Stage.HEADER_CONVERTER, Stage.TRANSFORMATION,
                       Stage.KAFKA_PRODUCE, Stage.KAFKA_CONSUME})


@dataclass(frozen=True)
class Failure:
    """One error: where it happened (stage and the class doing the work) and the consumed record, if any."""

    stage: Stage
    class_name: str
    error: BaseException
    connector: str
    task_id: int
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    key: bytes | None = None
    value: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()


@dataclass(frozen=True)
class DeadLetter:
    """The record to produce to the dead letter queue."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass(frozen=True)
class Decision:
    fail: bool  # True: fail the task with the error; False: skip the record
    dead_letter: DeadLetter | None = None
    log_message: str | None = None  # to log at ERROR, when errors.log.enable is set


class ErrorPolicy:
    """Decides, per failure, between failing the task and skipping the record (and what to report)."""

    def __init__(self, config: Mapping[str, Any], sink: bool) -> None:
        """`config` is the connector's config (other keys are ignored); `sink` says whether it is a sink
        connector: Kafka's dead letter queue exists for sinks only."""
        parsed = CONFIG_DEF.parse({k: v for k, v in config.items() if k in CONFIG_DEF.keys})
        self.tolerate_all = str(parsed["errors.tolerance"]).lower() == "all"
        self.log_enabled: bool = parsed["errors.log.enable"]
        self.log_messages: bool = parsed["errors.log.include.messages"]
        self.dlq_topic: str = parsed["errors.deadletterqueue.topic.name"] if sink else ""
        self.dlq_replication_factor: int = parsed["errors.deadletterqueue.topic.replication.factor"]
        self.context_headers: bool = parsed["errors.deadletterqueue.context.headers.enable"]
        self.retry_timeout_ms: int = parsed["errors.retry.timeout"]
        self.retry_max_delay_ms: int = parsed["errors.retry.delay.max.ms"]

    def retry_delay_ms(self, error: BaseException, attempt: int, elapsed_ms: int) -> int | None:
        """How long to wait before retrying after `attempt` (1-based) failed attempts that took `elapsed_ms`
        so far; None: stop retrying (not retriable, or errors.retry.timeout has passed)."""
        if not isinstance(error, RetriableException) or self.retry_timeout_ms == 0:
            return None
        delay = min(RETRY_MIN_DELAY_MS << min(attempt - 1, 30), self.retry_max_delay_ms)
        if self.retry_timeout_ms < 0:
            return delay
        remaining = self.retry_timeout_ms - elapsed_ms
        return None if remaining <= 0 else min(delay, remaining)

    def decide(self, failure: Failure) -> Decision:
        if not self.tolerate_all or failure.stage not in TOLERABLE:
            return Decision(fail=True, log_message=self._log(failure) if self.log_enabled else None)
        return Decision(fail=False, dead_letter=self._dead_letter(failure),
                        log_message=self._log(failure) if self.log_enabled else None)

    def _dead_letter(self, failure: Failure) -> DeadLetter | None:
        if not self.dlq_topic or failure.topic is None:
            return None
        headers = list(failure.headers)
        if self.context_headers:
            headers.extend(context_headers(failure))
        return DeadLetter(self.dlq_topic, failure.key, failure.value, headers)

    def _log(self, failure: Failure) -> str:
        text = (f"Error encountered in task {failure.connector}-{failure.task_id}. Executing stage "
                f"'{failure.stage.value}' with class '{failure.class_name}'")
        if failure.topic is not None:
            text += (f", where consumed record is {{topic='{failure.topic}', partition={failure.partition}, "
                     f"offset={failure.offset}}}")
            if self.log_messages:
                text += f" with key {failure.key!r}, value {failure.value!r} and headers {list(failure.headers)!r}"
        return text + "."


def context_headers(failure: Failure) -> list[tuple[str, bytes | None]]:
    """Kafka's `__connect.errors.*` headers (UTF-8 text values) describing `failure`."""
    err = failure.error
    values: list[tuple[str, str | None]] = []
    if failure.topic is not None:
        values += [(TOPIC, failure.topic), (PARTITION, str(failure.partition)), (OFFSET, str(failure.offset))]
    values += [(CONNECTOR, failure.connector), (TASK, str(failure.task_id)), (STAGE, failure.stage.value),
               (CLASS, failure.class_name), (EXCEPTION, f"{type(err).__module__}.{type(err).__qualname__}"),
               (MESSAGE, str(err) or None),
               (STACKTRACE, "".join(traceback.format_exception(type(err), err, err.__traceback__)))]
    return [(k, None if v is None else v.encode()) for k, v in values]
