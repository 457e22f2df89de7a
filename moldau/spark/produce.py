"""Producing the sink's records: the producer settings every sink producer starts from, and a send loop
that returns only once every record is acknowledged."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from moldau.spark.options import SinkOptions

log = logging.getLogger(__name__)


class SinkError(RuntimeError):
    """Records could not be written (or acknowledged) by the broker; `error` is the client's first error."""

    def __init__(self, message: str, error: KafkaError | None = None) -> None:
        super().__init__(message)
        self.error = error


# Spark reuses its Python workers across tasks, and the driver publishes every micro-batch of a query. A
# new idempotent producer first has to connect and get a producer id (about half a second), and a
# transactional one also runs init_transactions, so each process keeps its producers, one per settings
# (the transactional id is one of them), between uses.
SettingsKey = tuple[tuple[str, str], ...]
_IDLE_PRODUCERS: dict[SettingsKey, Producer] = {}


def settings_key(conf: dict[str, Any]) -> SettingsKey:
    """`conf` as a dictionary key: producers are kept per settings."""
    return tuple(sorted((name, str(value)) for name, value in conf.items()))


def has_idle_producer(conf: dict[str, Any]) -> bool:
    """Whether `reused_producer(conf)` would hand out a kept producer rather than a new one."""
    return settings_key(conf) in _IDLE_PRODUCERS


@contextmanager
def reused_producer(conf: dict[str, Any],
                    prepare: Callable[[Producer], None] | None = None) -> Iterator[Producer]:
    """A producer with settings `conf`: this process's idle one, else a new one, given to `prepare` first.

    It is kept for the next use only if the block succeeds: after a failure its idempotence state may be
    broken for good (a fatal error, a fenced transactional id), and a fresh producer costs little next to a
    failed task.
    """
    key = settings_key(conf)
    producer = _IDLE_PRODUCERS.pop(key, None)
    if producer is None:
        producer = Producer(conf)
        if prepare is not None:
            prepare(producer)
    yield producer
    _IDLE_PRODUCERS[key] = producer


def producer_conf(options: SinkOptions) -> dict[str, Any]:
    """The user's `kafka.*` options, then the ones the sink must own."""
    return {
        "linger.ms": 5,
        # Kafka's Java clients hash keys with murmur2; matching them keeps a key in the same partition
        # whichever client wrote it.
        "partitioner": "murmur2_random",
        **options.client_conf,
        "bootstrap.servers": options.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        # Without an error callback the client raises a fatal error (a fenced transactional producer, a
        # broken idempotence sequence) out of whichever poll or flush sees it, in the middle of delivery
        # callbacks. With one, the records fail with the error and `send_all` reports it as a SinkError.
        "error_cb": log_client_error,
    }


def log_client_error(error: KafkaError) -> None:
    """The producer's error callback: the client retries what it can, so this only logs."""
    log.log(logging.ERROR if error.fatal() else logging.INFO, "moldau sink producer: %s", error.str())


def send_all(producer: Producer, rows: Iterable[dict[str, Any]],
             acknowledged: Callable[[int], None] | None = None) -> int:
    """Produce `rows` and wait until all are acknowledged (`acknowledged` gets each record's offset).

    Returns the number of rows; raises SinkError on the first failed or unacknowledged record.
    """
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        elif acknowledged is not None:
            acknowledged(msg.offset())

    count = 0
    for row in rows:
        _produce(producer, row, on_delivery)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
            if errors:
                break
    remaining = producer.flush(60)
    if errors or remaining:
        detail = errors[0].str() if errors else f"{remaining} records not acknowledged within 60 s"
        raise SinkError(f"writing to Moldau failed: {detail}", errors[0] if errors else None)
    return count


def _produce(producer: Producer, row: dict[str, Any], on_delivery: Any) -> None:
    """produce(), waiting for room when the client's queue is full."""
    while True:
        try:
            producer.produce(on_delivery=on_delivery, **row)
            return
        except BufferError:
            producer.poll(0.1)
        except KafkaException as exc:  # a producer in a fatal state takes no more records
            raise SinkError(f"writing to Moldau failed: {exc.args[0].str()}", exc.args[0]) from exc
