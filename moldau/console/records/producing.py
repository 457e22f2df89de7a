"""The console's produce form: one record (key, value, headers as `name=value` lines, an optional partition)
produced by a Producer acting for the signed-in user, so the cluster's ACLs, quotas and schema validation apply to
it as to any application. `produce` blocks until the broker answers; callers run it in a worker thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from moldau.console.errors import ConsoleError
from moldau.console.forms import name_value_lines
from moldau.text import ascii_digits

__all__ = ["ProduceForm", "Produced", "parse_form", "produce"]

DELIVERY_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class ProduceForm:
    key: str = ""
    value: str = ""
    headers_text: str = ""
    partition_text: str = ""
    null_key: bool = False

    @property
    def headers(self) -> list[tuple[str, str | bytes | None]]:
        return [(name, value.encode()) for name, value in name_value_lines(self.headers_text, "Headers", "name=value")]

    @property
    def partition(self) -> int | None:
        text = self.partition_text.strip()
        if not text:
            return None
        if not ascii_digits(text):
            raise ConsoleError(400, f"partition must be a whole number of 0 or more, not {text!r}")
        return int(text)


@dataclass(frozen=True)
class Produced:
    partition: int
    offset: int


def parse_form(form: Any) -> ProduceForm:
    """The form's fields (a Starlette FormData or any mapping of strings)."""
    return ProduceForm(key=str(form.get("key", "")), value=str(form.get("value", "")),
                       headers_text=str(form.get("headers", "")), partition_text=str(form.get("partition", "")),
                       null_key=not str(form.get("key", "")))


def produce(config: dict[str, Any], topic: str, form: ProduceForm) -> Produced:
    """Produce the form's record and wait for the broker's answer. Raises ConsoleError (bad input) or
    KafkaException (refused: authorization, schema validation, unknown partition ...)."""
    headers, partition = form.headers, form.partition  # validate before connecting
    producer = Producer({**config, "acks": "all", "enable.idempotence": False, "linger.ms": 0,
                         "message.timeout.ms": DELIVERY_TIMEOUT_MS})
    outcome: list[tuple[KafkaError | None, Message]] = []
    extra: dict[str, Any] = {} if partition is None else {"partition": partition}
    try:
        producer.produce(topic, value=form.value.encode(), key=None if form.null_key else form.key.encode(),
                         headers=headers or None, on_delivery=lambda err, msg: outcome.append((err, msg)), **extra)
        producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 5)
    finally:
        producer.close()  # its connections end with the request, not when the garbage collector gets to it
    if not outcome:
        raise ConsoleError(504, "the broker did not answer the produce request in time")
    error, message = outcome[0]
    if error is not None:
        raise KafkaException(error)
    return Produced(message.partition() or 0, message.offset() or 0)
