"""Measuring what a quota lets a real producer do: produce as fast as allowed, record each ack, take the rate."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Producer

MESSAGE = b"x" * 500


def produce_for(bootstrap: str, topic: str, client_id: str, seconds: float, out: list[tuple[float, int]],
                **conf: Any) -> None:
    """Produce as fast as the client is let for `seconds`, recording (ack time, bytes) of each delivered message.

    What is still queued or in flight then is dropped, its acknowledgements ignored: at a throttled rate the full
    queue would take many seconds more, after the time being measured (librdkafka counts the requests a throttled
    connection holds back as in flight)."""
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                         "batch.size": 4096, "acks": 1, "queue.buffering.max.kbytes": 256, **conf})

    def delivered(err: object, msg: object) -> None:
        if err is None:
            out.append((time.monotonic(), len(MESSAGE)))

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            producer.produce(topic, MESSAGE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.purge(in_queue=True, in_flight=True)
    producer.flush(30)


def rate(events: list[tuple[float, int]], start: float, end: float) -> float:
    """Bytes per second acknowledged in [start, end)."""
    return sum(n for t, n in events if start <= t < end) / (end - start)
