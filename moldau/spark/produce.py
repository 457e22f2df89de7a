"""Producing the sink's records: the producer settings every sink producer starts from, and a send loop
that returns only once every record is acknowledged."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import KafkaError, Producer

from moldau.spark.options import SinkOptions


class SinkError(RuntimeError):
    """Records could not be written (or acknowledged) by the broker."""


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
    }


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
        raise SinkError(f"writing to Moldau failed: {detail}")
    return count


def _produce(producer: Producer, row: dict[str, Any], on_delivery: Any) -> None:
    """produce(), waiting for room when the client's queue is full."""
    while True:
        try:
            producer.produce(on_delivery=on_delivery, **row)
            return
        except BufferError:
            producer.poll(0.1)
