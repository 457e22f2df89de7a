"""`moldau produce`: send lines of a file or stdin to a topic, one record per line.

Records go through confluent-kafka's `Producer` (librdkafka), so batching, compression and acks
behave exactly as they do for applications. With `--value-format` (or `--key-format`) each line is a JSON
document written in Avro, JSON Schema or Protobuf through the schema registry (see `moldau.cli.serde`).
"""

import argparse
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from confluent_kafka import KafkaError, Message, Producer

from moldau.cli.common import (
    REQUEST_TIMEOUT_S,
    CliError,
    add_bootstrap_option,
    check_reachable,
    client_config,
    describe_error,
    error_name,
    plural,
    request_failed,
    topic_error,
)
from moldau.cli.format_options import Serialize, add_format_options, format_specs, registry_access
from moldau.cli.progress import Progress
from moldau.cli.topics import config_pair

# Long enough for a broker restart, short enough that a dead broker does not hang the command.
DELIVERY_TIMEOUT_MS = 60_000
ERRORS_SHOWN = 5
# How often the records count beside a byte progress bar is updated.
NOTE_EVERY_RECORDS = 1000


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `produce` to the top-level parser."""
    text = "send each input line as a record to a topic"
    parser = subparsers.add_parser("produce", help=text, description=text)
    parser.add_argument("topic", metavar="TOPIC")
    add_bootstrap_option(parser)
    parser.add_argument("--file", "-f", metavar="FILE", help="read records from FILE (default: stdin)")
    parser.add_argument("--key-separator", metavar="SEP", help="split each line into KEY SEP VALUE")
    parser.add_argument(
        "--header",
        type=config_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="header added to every record (repeatable)",
    )
    parser.add_argument("--partition", "-p", type=int, metavar="N", help="partition to write to (default: by key)")
    parser.add_argument("--acks", choices=("0", "1", "all"), default="all", help="acknowledgements (default: all)")
    parser.add_argument(
        "--compression",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        default="none",
        help="batch compression codec (default: none)",
    )
    parser.add_argument("--linger-ms", type=int, default=5, metavar="N", help="batching delay (default: 5)")
    add_format_options(parser, producing=True)
    parser.set_defaults(func=run)


@dataclass
class Tally:
    """Delivery outcomes, updated from librdkafka's delivery callbacks."""

    delivered: int = 0
    failed: int = 0
    reported: dict[str, int] = field(default_factory=dict)

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        """Count one delivery report, printing the first few distinct failures."""
        del msg
        if err is None:
            self.delivered += 1
            return
        self.failed += 1
        name = error_name(err)
        seen = self.reported.get(name, 0)
        self.reported[name] = seen + 1
        if seen == 0 and len(self.reported) <= ERRORS_SHOWN:
            print(f"error: delivery failed: {describe_error(err)}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Produce every input line, flush, and print a summary on stderr."""
    check_reachable(args.bootstrap_server)
    producer = Producer(_config(args))
    _check_topic(producer, args.topic, args.partition)
    tally = Tally()
    progress = _progress(args.file)
    interrupted = False
    failure: CliError | None = None
    # Either way, stop reading but still deliver what was already handed to the producer.
    try:
        _produce_input(producer, args, tally, progress)
    except KeyboardInterrupt:
        interrupted = True
    except CliError as exc:
        failure = exc
    _flush(producer)
    progress.close()
    code = _summary(args.topic, tally, interrupted)
    if failure is not None:
        raise failure
    return code


def _progress(path: str | None) -> Progress:
    """From a file: a bar over its bytes (its size known), with the records so far; from stdin: records/s."""
    if path is None or path == "-":
        return Progress("producing", unit="rec", scale_units=True)
    try:
        size = os.path.getsize(path)
    except OSError:
        size = None  # reported when the file is opened
    return Progress(f"producing {os.path.basename(path)}", total=size, unit="B", scale_units=True)


def _produce_input(producer: Producer, args: argparse.Namespace, tally: Tally, progress: Progress) -> None:
    """Hand every input line to the producer as one record."""
    headers: list[tuple[str, str | bytes | None]] = [(k, v.encode()) for k, v in args.header]
    encode_key, encode_value = _encoders(args)
    by_bytes = args.file not in (None, "-")
    with _open_input(args.file) as stream:
        for line_number, (line, size) in enumerate(_lines(stream), start=1):
            key, value = _split(line, args.key_separator, line_number)
            if key is not None and encode_key is not None:
                key = _encoded(encode_key, key, line_number)
            if encode_value is not None:
                value = _encoded(encode_value, value, line_number)
            _send(producer, args, key, value, headers, tally)
            progress.advance(size if by_bytes else 1)
            if by_bytes and line_number % NOTE_EVERY_RECORDS == 0:
                progress.note(f"{line_number:,} records")


def _encoders(args: argparse.Namespace) -> tuple[Serialize | None, Serialize | None]:
    """The key's and the value's serializer when their format is given (None: the line's bytes as they are)."""
    if args.key_format is not None and args.key_separator is None:
        raise CliError("--key-format needs --key-separator: each line is then KEY SEP VALUE")
    key_spec, value_spec = format_specs(args)
    if key_spec is None and value_spec is None:
        return None, None
    from moldau.cli.serde import serializer  # its libraries load only for a format (format_options.py)

    registry = registry_access(args)
    return (None if key_spec is None else serializer(key_spec, registry, args.topic),
            None if value_spec is None else serializer(value_spec, registry, args.topic))


def _encoded(encode: Serialize, data: bytes, line_number: int) -> bytes:
    try:
        return encode(data)
    except CliError as exc:
        raise CliError(f"line {line_number}: {exc}") from None


def _config(args: argparse.Namespace) -> dict[str, Any]:
    return client_config(
        args.bootstrap_server,
        **{
            "acks": args.acks,
            "compression.type": args.compression,
            "linger.ms": args.linger_ms,
            "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
            # Producing to a missing topic is an error here, whatever the broker's auto-create setting.
            "allow.auto.create.topics": False,
        },
    )


def _check_topic(producer: Producer, topic: str, partition: int | None) -> None:
    """Fail before reading input when the topic or partition does not exist."""
    try:
        metadata = producer.list_topics(topic, timeout=REQUEST_TIMEOUT_S)
    except Exception as exc:
        raise request_failed(exc, f"cannot fetch metadata for topic '{topic}'") from None
    info = metadata.topics.get(topic)
    if info is None:
        raise CliError(f"topic '{topic}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)")
    if info.error is not None:
        raise topic_error(topic, info.error, "produce to")
    if partition is not None and partition not in info.partitions:
        raise CliError(f"topic '{topic}' has no partition {partition} (it has {len(info.partitions)})")


def _open_input(path: str | None) -> IO[bytes]:
    if path is None or path == "-":
        # A fresh handle on fd 0 so closing it at the end leaves sys.stdin alone.
        return open(sys.stdin.fileno(), "rb", closefd=False)
    try:
        return open(path, "rb")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None


def _lines(stream: IO[bytes]) -> Iterator[tuple[bytes, int]]:
    """Input lines without their line ending, with their size as read; bytes are kept as-is, so any encoding
    passes through."""
    for raw in stream:
        line = raw
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        yield line, len(raw)


def _split(line: bytes, separator: str | None, line_number: int) -> tuple[bytes | None, bytes]:
    """(key, value) of one line; without a separator option every key is null."""
    if separator is None:
        return None, line
    key, sep, value = line.partition(separator.encode())
    if not sep:
        raise CliError(f"line {line_number} has no key separator {separator!r}")
    return key, value


def _send(
    producer: Producer,
    args: argparse.Namespace,
    key: bytes | None,
    value: bytes,
    headers: list[tuple[str, str | bytes | None]],
    tally: Tally,
) -> None:
    """Queue one record, waiting for room when librdkafka's local queue is full."""
    extra: dict[str, Any] = {} if args.partition is None else {"partition": args.partition}
    while True:
        try:
            producer.produce(args.topic, value=value, key=key, headers=headers, on_delivery=tally.on_delivery, **extra)
            break
        except BufferError:
            producer.poll(0.1)
    producer.poll(0)


def _flush(producer: Producer) -> None:
    """Wait for outstanding deliveries; they either succeed or fail within the delivery timeout."""
    while producer.flush(1.0) > 0:
        pass


def _summary(topic: str, tally: Tally, interrupted: bool) -> int:
    print(f"produced {plural(tally.delivered, 'record')} to {topic}", file=sys.stderr)
    if tally.failed:
        kinds = ", ".join(f"{name} x{count}" for name, count in tally.reported.items())
        print(f"error: {plural(tally.failed, 'record')} not delivered ({kinds})", file=sys.stderr)
        return 1
    return 130 if interrupted else 0
