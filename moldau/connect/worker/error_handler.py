"""Runs one record's conversion or transform stage under the connector's `errors.*` policy: retries a
`RetriableException` with backoff, then fails the task or skips the record as `ErrorPolicy` decides, logging
the error and handing dead letter records to the sink task's dead letter queue producer.

Time is injected (a monotonic clock in seconds and an interruptible sleep), so retries stop when the task does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from moldau.connect.error_policy import DeadLetter, ErrorPolicy, Failure, Stage
from moldau.connect.errors import ConnectException
from moldau.connect.transforms.chain import TransformError

__all__ = ["Consumed", "ErrorHandler", "ToleranceExceeded"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]
Sleep = Callable[[float], bool]  # waits up to that many seconds; True: interrupted (the task is stopping)


class ToleranceExceeded(ConnectException):
    """The error that fails a task when `errors.tolerance` does not let it skip the record (Kafka's message)."""


@dataclass(frozen=True)
class Consumed:
    """The consumed record a sink stage works on, as it came from Kafka (for logs and the dead letter queue)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()


class ErrorHandler:
    def __init__(self, policy: ErrorPolicy, connector: str, task_id: int, clock: Clock, sleep: Sleep,
                 dead_letters: Callable[[DeadLetter], None] | None = None) -> None:
        self.policy = policy
        self.connector = connector
        self.task_id = task_id
        self.clock = clock
        self.sleep = sleep
        self.dead_letters = dead_letters
        self.skipped = 0
        self.class_names: dict[Stage, str] = {}  # the class doing each stage's work, for error reports

    def execute(self, stage: Stage, operation: Callable[[], T],
                consumed: Consumed | None = None) -> tuple[bool, T | None]:
        """(True, result) when `operation` succeeded, perhaps after retries; (False, None) when it failed and
        the policy skips the record. Raises ToleranceExceeded when the policy fails the task."""
        try:
            return True, operation()
        except Exception as exc:  # any plugin error is judged by the policy
            return self._retry_or_handle(stage, operation, consumed, exc)

    def _retry_or_handle(self, stage: Stage, operation: Callable[[], T], consumed: Consumed | None,
                         exc: Exception) -> tuple[bool, T | None]:
        started = self.clock()  # errors.retry.timeout counts from the first failure
        attempt = 1
        while True:
            error: BaseException = exc
            failed_class = self.class_names.get(stage, "")
            if isinstance(exc, TransformError) and exc.__cause__ is not None:
                error, failed_class = exc.__cause__, exc.class_name  # the transform's own error and class
            delay_ms = self.policy.retry_delay_ms(error, attempt, round((self.clock() - started) * 1000))
            if delay_ms is None or self.sleep(delay_ms / 1000):
                self._handle(stage, failed_class, error, exc, consumed)
                return False, None
            log.debug("connector %s task %d: %s failed (attempt %d), retried after %d ms: %s",
                      self.connector, self.task_id, stage.value, attempt, delay_ms, error)
            attempt += 1
            try:
                return True, operation()
            except Exception as again:
                exc = again

    def _handle(self, stage: Stage, class_name: str, error: BaseException, raised: Exception,
                consumed: Consumed | None) -> None:
        failure = Failure(stage, class_name, error, self.connector, self.task_id)
        if consumed is not None:
            failure = Failure(stage, class_name, error, self.connector, self.task_id, consumed.topic,
                              consumed.partition, consumed.offset, consumed.key, consumed.value, consumed.headers)
        decision = self.policy.decide(failure)
        if decision.log_message is not None:
            log.error("%s", decision.log_message, exc_info=error)
        if decision.fail:
            raise ToleranceExceeded("Tolerance exceeded in error handler") from raised
        self.skipped += 1
        if decision.dead_letter is not None and self.dead_letters is not None:
            self.dead_letters(decision.dead_letter)
