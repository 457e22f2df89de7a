"""`moldau consume`: print records of a topic without joining or touching any consumer group.

Records are fetched with confluent-kafka's `Consumer` (librdkafka) using `assign()` only: it never
subscribes, never commits, and so never sends JoinGroup, SyncGroup, Heartbeat or OffsetCommit.
"""

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import IO, Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    Message,
    TopicPartition,
)

from moldau.cli.common import (
    REQUEST_TIMEOUT_S,
    CliError,
    add_bootstrap_option,
    check_reachable,
    client_config,
    describe_error,
    error_name,
    parse_time,
    plural,
    request_failed,
    topic_error,
)
from moldau.cli.format_options import FieldFormat, add_format_options, format_specs, registry_access
from moldau.cli.progress import Progress
from moldau.registry.rest_client import RegistryAccess
from moldau.text import ascii_digits

# librdkafka will not build a consumer without a group id; this one is never joined or committed to.
THROWAWAY_GROUP = "moldau-cli-assign-only"
BATCH = 500
POLL_S = 0.5
Renderer = Callable[[Message], str]
PRESETS = {"value": "%v", "kv": "%k\\t%v"}
FORMAT_HELP = """\
formats:
  value   the value only (default)
  kv      key TAB value
  full    topic/partition@offset  time  key=...  value=...  headers=...
  json    one JSON object per record
  any other text is a template: %k key, %v value, %p partition, %o offset,
  %t timestamp (ms), %T topic, %h headers (k=v,...), %s value size, %K key size,
  %% a percent sign; \\t and \\n are a tab and a newline. One line per record.

without --from-beginning, --offset or --from-time only new records are printed."""


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `consume` to the top-level parser."""
    summary = "print records of a topic (no consumer group is used)"
    parser = subparsers.add_parser(
        "consume",
        help=summary,
        description=summary,
        epilog=FORMAT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("topic", metavar="TOPIC")
    add_bootstrap_option(parser)
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument("--offset", type=non_negative, metavar="N", help="start at offset N of each partition")
    start.add_argument(
        "--from-time", type=parse_time, metavar="TIME", help="start at the first record at or after TIME"
    )
    parser.add_argument("--partition", "-p", type=int, metavar="N", help="read only partition N (default: all)")
    parser.add_argument("--max-messages", type=non_negative, metavar="N", help="stop after N records")
    parser.add_argument(
        "--timeout-ms", type=non_negative, metavar="N", help="stop after N ms without records (default: never)"
    )
    parser.add_argument("--format", default="value", metavar="FMT", help="output preset or template (see below)")
    add_format_options(parser, producing=False)
    parser.set_defaults(func=run)


def non_negative(text: str) -> int:
    """argparse type for non-negative integers."""
    if not ascii_digits(text):
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return int(text)


def run(args: argparse.Namespace) -> int:
    """Assign the chosen partitions at the chosen positions and print records until told to stop."""
    render = decoding(make_renderer(args.format), *format_specs(args), registry_access(args))
    check_reachable(args.bootstrap_server)
    consumer = Consumer(_config(args.bootstrap_server))
    try:
        partitions = _partitions(consumer, args.topic, args.partition)
        consumer.assign(_start_positions(consumer, args, partitions))
        _consume(consumer, render, args)
    finally:
        consumer.close()
    return 0


def decoding(render: Renderer, key: FieldFormat | None, value: FieldFormat | None,
             registry: RegistryAccess) -> Renderer:
    """The renderer, shown keys and values decoded to JSON first when their format is given."""
    if key is None and value is None:
        return render
    from moldau.cli.serde import deserializer  # its libraries load only for a format (format_options.py)

    decode_key = None if key is None else deserializer(key, registry)
    decode_value = None if value is None else deserializer(value, registry)

    def decoded(msg: Message) -> str:
        raw_key, raw_value = msg.key(), msg.value()
        if decode_key is not None and raw_key is not None:
            msg.set_key(decode_key(raw_key, msg.topic() or ""))
        if decode_value is not None and raw_value is not None:  # a tombstone stays null
            msg.set_value(decode_value(raw_value, msg.topic() or ""))
        return render(msg)
    return decoded


def _consume(consumer: Consumer, render: Renderer, args: argparse.Namespace) -> None:
    """Run the print loop; Ctrl-C ends it normally and the count is reported either way."""
    count = Count()
    signal.signal(signal.SIGTERM, interrupt)
    # A bar only when counting towards --max-messages (a tail has no end to show), only on a terminal, and only
    # while the records go elsewhere (a file, a pipe): printed on the same terminal they would tear it apart.
    progress = (Progress(f"consuming {args.topic}", total=args.max_messages, scale_units=True)
                if args.max_messages is not None and not sys.stdout.isatty() else None)
    try:
        _loop(consumer, render, args, count, sys.stdout.buffer, progress)
    except KeyboardInterrupt:
        pass
    finally:
        if progress is not None:
            progress.close()
        print(f"consumed {plural(count.value, 'record')} from {args.topic}", file=sys.stderr)


def interrupt(signum: int, frame: FrameType | None) -> None:
    """Treat SIGTERM like Ctrl-C, so a stopped tail still closes cleanly and reports its count."""
    del signum, frame
    raise KeyboardInterrupt


@dataclass
class Count:
    """Records printed so far, kept outside the loop so an interrupt can still report it."""

    value: int = 0


def _config(bootstrap: str) -> dict[str, Any]:
    warnings = Warnings()
    return client_config(
        bootstrap,
        **{
            "group.id": THROWAWAY_GROUP,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # Only used when an assigned position falls outside the log, e.g. after retention.
            "auto.offset.reset": "earliest",
            "error_cb": warnings.report,
        },
    )


@dataclass
class Warnings:
    """Client-level errors (lost connections and such): shown once each while librdkafka retries."""

    last: str = ""

    def report(self, err: KafkaError) -> None:
        """Print `err` unless it repeats the previous warning."""
        text = describe_error(err)
        if text != self.last:
            print(f"warning: {text}", file=sys.stderr)
            self.last = text


def _partitions(consumer: Consumer, topic: str, only: int | None) -> list[int]:
    """The partitions to read: all of the topic's, or just `only` after checking it exists."""
    try:
        metadata = consumer.list_topics(topic, timeout=REQUEST_TIMEOUT_S)
    except Exception as exc:
        raise request_failed(exc, f"cannot fetch metadata for topic '{topic}'") from None
    info = metadata.topics.get(topic)
    if info is None:
        raise CliError(f"topic '{topic}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)")
    if info.error is not None:
        raise topic_error(topic, info.error, "consume from")
    if only is None:
        return sorted(info.partitions)
    if only not in info.partitions:
        raise CliError(f"topic '{topic}' has no partition {only} (it has {len(info.partitions)})")
    return [only]


def _start_positions(consumer: Consumer, args: argparse.Namespace, partitions: list[int]) -> list[TopicPartition]:
    """Where each partition starts, from the --from-beginning / --offset / --from-time choice."""
    if args.from_time is not None:
        return _positions_at_time(consumer, args.topic, partitions, args.from_time)
    if args.offset is not None:
        return [TopicPartition(args.topic, p, _clamped(consumer, args.topic, p, args.offset)) for p in partitions]
    start = OFFSET_BEGINNING if args.from_beginning else OFFSET_END
    return [TopicPartition(args.topic, p, start) for p in partitions]


def _clamped(consumer: Consumer, topic: str, partition: int, offset: int) -> int:
    """`offset` moved into the partition's current range, so a too-large offset waits for new records."""
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=REQUEST_TIMEOUT_S, cached=False
        )
    except Exception as exc:
        raise request_failed(exc, f"cannot read offsets of {topic}/{partition}") from None
    return int(min(max(offset, low), high))


def _positions_at_time(consumer: Consumer, topic: str, partitions: list[int], ms: int) -> list[TopicPartition]:
    """First offset at or after `ms` in each partition; the log end where nothing is that new."""
    query = [TopicPartition(topic, p, ms) for p in partitions]
    try:
        found = consumer.offsets_for_times(query, timeout=REQUEST_TIMEOUT_S)
    except Exception as exc:
        raise request_failed(exc, f"cannot look up offsets by time in topic '{topic}'") from None
    positions = []
    for tp in found:
        if tp.error is not None:
            raise request_failed(Exception(describe_error(tp.error)), f"cannot look up {topic}/{tp.partition}")
        positions.append(TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END))
    return positions


def _loop(consumer: Consumer, render: Renderer, args: argparse.Namespace, count: Count, out: IO[bytes],
          progress: Progress | None = None) -> None:
    """Print records until --max-messages is reached or nothing arrived for --timeout-ms."""
    last_record = time.monotonic()
    while args.max_messages is None or count.value < args.max_messages:
        wanted = BATCH if args.max_messages is None else min(BATCH, args.max_messages - count.value)
        messages = consumer.consume(wanted, timeout=POLL_S)
        if messages:
            last_record = time.monotonic()
        elif args.timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= args.timeout_ms:
            return
        for msg in messages:
            check_message(msg)
            out.write(render(msg).encode() + b"\n")
            count.value += 1
        out.flush()
        if progress is not None and messages:
            progress.advance(len(messages))


def check_message(msg: Message) -> None:
    """Stop on a partition-level error such as the topic being deleted while reading."""
    err = msg.error()
    if err is None:
        return
    if err.code() == KafkaError._PARTITION_EOF:
        return
    where = f"{msg.topic()}/{msg.partition()}"
    if error_name(err) == "UNKNOWN_TOPIC_OR_PARTITION":
        raise CliError(f"topic '{msg.topic()}' does not exist ({error_name(err)})")
    raise CliError(f"cannot read {where}: {describe_error(err)}")


def text(data: bytes | None) -> str:
    """Bytes as UTF-8 text, with backslash escapes for bytes that are not valid UTF-8."""
    return "" if data is None else data.decode("utf-8", errors="backslashreplace")


def _headers(msg: Message) -> list[tuple[str, bytes | None]]:
    """The record's headers in order; duplicates are kept, as Kafka allows them."""
    raw = msg.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    return [(k, v.encode() if isinstance(v, str) else v) for k, v in pairs]


def headers_text(msg: Message) -> str:
    """Headers as `k=v,k2=v2`; a header with a null value shows its key alone."""
    return ",".join(k if v is None else f"{k}={text(v)}" for k, v in _headers(msg))


def _timestamp(msg: Message) -> int:
    kind, ms = msg.timestamp()
    return int(ms) if kind in (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME) else -1


def _size(data: bytes | None) -> str:
    return "-1" if data is None else str(len(data))


FIELDS: dict[str, Renderer] = {
    "k": lambda m: text(m.key()),
    "v": lambda m: text(m.value()),
    "p": lambda m: str(m.partition()),
    "o": lambda m: str(m.offset()),
    "t": lambda m: str(_timestamp(m)),
    "T": lambda m: str(m.topic()),
    "h": headers_text,
    "s": lambda m: _size(m.value()),
    "K": lambda m: _size(m.key()),
}
ESCAPES = {"n": "\n", "t": "\t", "\\": "\\"}


def make_renderer(fmt: str) -> Renderer:
    """The function that turns one record into its output line for `--format fmt`."""
    if fmt == "json":
        return render_json
    if fmt == "full":
        return render_full
    return compile_template(PRESETS.get(fmt, fmt))


def compile_template(template: str) -> Renderer:
    """Parse a `%x` template once, so each record only runs the field functions."""
    parts: list[str | Renderer] = []
    index = 0
    while index < len(template):
        char = template[index]
        following = template[index + 1 : index + 2]
        if char == "%" and following in FIELDS:
            parts.append(FIELDS[following])
        elif char == "%" and following == "%":
            parts.append("%")
        elif char == "\\" and following in ESCAPES:
            parts.append(ESCAPES[following])
        elif char == "%":
            raise CliError(f"unknown format field '%{following}' in --format (see `moldau consume --help`)")
        else:
            parts.append(char)
            index += 1
            continue
        index += 2
    return lambda msg: "".join(part if isinstance(part, str) else part(msg) for part in parts)


def _iso(ms: int) -> str:
    if ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _nullable(data: bytes | None) -> str:
    return "null" if data is None else text(data)


def render_full(msg: Message) -> str:
    """`topic/partition@offset  time  key=...  value=...  headers=...`."""
    return (
        f"{msg.topic()}/{msg.partition()}@{msg.offset()}  {_iso(_timestamp(msg))}  "
        f"key={_nullable(msg.key())}  value={_nullable(msg.value())}  headers={headers_text(msg)}"
    )


def render_json(msg: Message) -> str:
    """One JSON object; key, value and header values are text (escaped as above) or null."""
    record = {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": _timestamp(msg),
        "key": None if msg.key() is None else text(msg.key()),
        "value": None if msg.value() is None else text(msg.value()),
        "headers": [[k, None if v is None else text(v)] for k, v in _headers(msg)],
    }
    return json.dumps(record, ensure_ascii=False)
