"""Entry point of the `moldau` command: the broker (`server`) and the client tools."""

import argparse
import os
import sys

from moldau import __version__
from moldau.cli import (
    acls,
    client_metrics,
    cluster,
    connect,
    consume,
    features,
    groups,
    mirror,
    partitions,
    pipeline,
    produce,
    quorum,
    quotas,
    schemas,
    share,
    top,
    topics,
    transactions,
    users,
)
from moldau.cli.common import CliError, use_command_config

SERVER = "server"


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="moldau",
        description="Moldau, a streaming platform that speaks the Apache Kafka protocol.",
    )
    parser.add_argument("--version", action="version", version=f"moldau {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # Listed for the help text only: main() hands `server` to its own parser before this one runs.
    commands.add_parser(SERVER, help="run a broker (see `moldau server --help`)", add_help=False)
    topics.register(commands)
    partitions.register(commands)
    produce.register(commands)
    consume.register(commands)
    groups.register(commands)
    share.register(commands)
    transactions.register(commands)
    pipeline.register(commands)
    cluster.register(commands)
    features.register(commands)
    quorum.register(commands)
    client_metrics.register(commands)
    acls.register(commands)
    quotas.register(commands)
    users.register(commands)
    schemas.register(commands)
    connect.register(commands)
    mirror.register(commands)
    top.register(commands)
    return parser


def run_server(argv: list[str]) -> int:
    """Parse and run `moldau server`.

    The broker module is imported only here so that a broken or missing broker never stops the
    client tools from working.
    """
    from moldau.cli import server

    parser = argparse.ArgumentParser(prog=f"moldau {SERVER}", description="Run a Moldau broker.")
    server.configure_parser(parser)
    return server.run(parser.parse_args(argv))


def main(argv: list[str] | None = None) -> int:
    """Run the command line in `argv` (default: the process arguments) and return the exit code."""
    args_list = sys.argv[1:] if argv is None else list(argv)
    if args_list[:1] == [SERVER]:
        return run_server(args_list[1:])
    args = build_parser().parse_args(mirror.with_default_action(args_list))
    try:
        use_command_config(getattr(args, "command_config", None))
        code: int = args.func(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 0
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail on a closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
