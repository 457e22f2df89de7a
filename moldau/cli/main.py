"""Entry point of the `moldau` command: the broker (`server`) and the client tools.

Each command's module is imported only when that command runs (all of them for the top-level help): the tools
import client libraries (librdkafka, the registry's serializers) and the broker imports its own stack, and a
process that loads every command's dependencies took about twice as long to start.
"""

import argparse
import importlib
import os
import sys

from moldau import __version__
from moldau.cli.common import CliError, use_command_config

SERVER = "server"
# Each command and the module in moldau.cli that registers it, in the order the help lists them.
COMMANDS = {
    "topics": "topics", "partitions": "partitions", "produce": "produce", "consume": "consume",
    "groups": "groups", "share": "share", "transactions": "transactions", "pipeline": "pipeline",
    "cluster": "cluster", "features": "features", "quorum": "quorum", "client-metrics": "client_metrics",
    "configs": "configs", "acls": "acls", "quotas": "quotas", "users": "users",
    "delegation-tokens": "delegation_tokens", "schemas": "schemas",
    "connect": "connect",
    "mirror": "mirror", "top": "top",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser with `command` registered, or every command when it is None or not one of them."""
    parser = argparse.ArgumentParser(
        prog="moldau",
        description="Moldau, a streaming platform that speaks the Apache Kafka protocol.",
    )
    parser.add_argument("--version", action="version", version=f"moldau {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # Listed for the help text only: main() hands `server` to its own parser before this one runs.
    commands.add_parser(SERVER, help="run a broker (see `moldau server --help`)", add_help=False)
    modules = [COMMANDS[command]] if command in COMMANDS else list(COMMANDS.values())
    for module in modules:
        importlib.import_module(f"moldau.cli.{module}").register(commands)
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
    if args_list[:1] == ["mirror"]:
        from moldau.cli.mirror import with_default_action

        args_list = with_default_action(args_list)
    args = build_parser(args_list[0] if args_list else None).parse_args(args_list)
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
