"""`moldau share consume`: a console share consumer (KIP-932): joins a share group, prints the records it is
given and acknowledges each one (accept, release or reject).

Records are fetched with confluent-kafka's `ShareConsumer` in explicit acknowledgement mode, so every printed record
is acknowledged with the chosen type, and records fetched beyond `--max-messages` are released for the group's
other members. Output formats are those of `moldau consume`.
"""

import argparse
import signal
import sys
import time
from typing import IO, Any

from confluent_kafka import AcknowledgeType, Message, ShareConsumer

from moldau.cli.common import add_bootstrap_option, check_reachable, client_config, plural, request_failed
from moldau.cli.consume import (
    FORMAT_HELP,
    Count,
    Renderer,
    Warnings,
    check_message,
    decoding,
    interrupt,
    make_renderer,
    non_negative,
)
from moldau.cli.format_options import add_format_options, format_specs, registry_access

ACKS = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE, "reject": AcknowledgeType.REJECT}
BATCH = 500
POLL_S = 0.5


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `share` (with `share consume`) to the top-level parser."""
    summary = "share groups (KIP-932): consume as a member of one"
    parser = subparsers.add_parser("share", help=summary, description=summary)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    consume_summary = "print records given to a member of a share group and acknowledge them"
    consume = actions.add_parser("consume", help=consume_summary, description=consume_summary,
                                 epilog=FORMAT_HELP.split("\n\nwithout")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    consume.add_argument("--group", "-g", required=True, metavar="GROUP", help="the share group to join")
    consume.add_argument("--topic", "-t", required=True, action="append", dest="topics", metavar="TOPIC",
                         help="a topic to consume (repeat for more)")
    add_bootstrap_option(consume)
    consume.add_argument("--ack", choices=sorted(ACKS), default="accept",
                         help="how each printed record is acknowledged (default: accept)")
    consume.add_argument("--max-messages", type=non_negative, metavar="N", help="stop after N records")
    consume.add_argument("--timeout-ms", type=non_negative, metavar="N",
                         help="stop after N ms without records (default: never)")
    consume.add_argument("--format", default="value", metavar="FMT", help="output preset or template (see below)")
    add_format_options(consume, producing=False)
    consume.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Join the share group, print and acknowledge records until told to stop, then commit and leave."""
    render = decoding(make_renderer(args.format), *format_specs(args), registry_access(args))
    check_reachable(args.bootstrap_server)
    consumer = ShareConsumer(_config(args))
    count = Count()
    signal.signal(signal.SIGTERM, interrupt)
    try:
        consumer.subscribe(args.topics)
        _loop(consumer, render, args, count, sys.stdout.buffer)
    except KeyboardInterrupt:
        pass
    finally:
        _finish(consumer)
        print(f"consumed {plural(count.value, 'record')} from {', '.join(args.topics)} as share group {args.group}",
              file=sys.stderr)
    return 0


def _config(args: argparse.Namespace) -> dict[str, Any]:
    wanted = BATCH if args.max_messages is None else max(1, min(BATCH, args.max_messages))
    return client_config(args.bootstrap_server, **{
        "group.id": args.group,
        "share.acknowledgement.mode": "explicit",
        "max.poll.records": wanted,
        "error_cb": Warnings().report,
    })


def _loop(consumer: ShareConsumer, render: Renderer, args: argparse.Namespace, count: Count,
          out: IO[bytes]) -> None:
    """Print and acknowledge records until --max-messages is reached or nothing came for --timeout-ms."""
    ack = ACKS[args.ack]
    last_record = time.monotonic()
    while args.max_messages is None or count.value < args.max_messages:
        try:
            messages = consumer.poll(POLL_S)
        except Exception as exc:
            raise request_failed(exc, f"cannot consume as share group '{args.group}'") from None
        records = [m for m in messages if not _is_error(m)]
        if records:
            last_record = time.monotonic()
        elif args.timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= args.timeout_ms:
            return
        for msg in records:
            if args.max_messages is not None and count.value >= args.max_messages:
                consumer.acknowledge(msg, AcknowledgeType.RELEASE)  # not printed: another member may have it
                continue
            out.write(render(msg).encode() + b"\n")
            consumer.acknowledge(msg, ack)
            count.value += 1
        out.flush()


def _is_error(msg: Message) -> bool:
    """A partition-level error stops the tool (as in `moldau consume`); end-of-partition notices are skipped."""
    check_message(msg)
    return msg.error() is not None


def _finish(consumer: ShareConsumer) -> None:
    """Make the acknowledgements durable before leaving the group."""
    try:
        consumer.commit_sync()
    except Exception as exc:
        print(f"warning: the last acknowledgements may not have been committed: {exc}", file=sys.stderr)
    finally:
        consumer.close()
