"""Pieces shared by the client commands: the bootstrap option, client settings and error reporting.

The client commands talk to the broker through confluent-kafka, the Python binding of librdkafka:
a well-kept, widely deployed Kafka client, so the tools exercise the broker the way real clients do.
"""

import argparse
import os
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from moldau.text import ascii_digits

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "MOLDAU_BOOTSTRAP"
# librdkafka debug contexts (e.g. "protocol,broker") for troubleshooting a broker; unset in normal use.
DEBUG_ENV = "MOLDAU_CLIENT_DEBUG"
# How long one admin or metadata request may take before the command gives up.
REQUEST_TIMEOUT_S = 15.0
CONNECT_TIMEOUT_S = 5.0


class CliError(Exception):
    """An expected failure, reported as one `error: ...` line on stderr instead of a traceback."""


# The client properties of `--command-config` (moldau.cli.command_config), read once per command by main().
_command_config: dict[str, str] = {}


def use_command_config(path: str | None) -> None:
    """Read `--command-config FILE` (None: none) for the clients this command makes. Raises CliError."""
    from moldau.cli import command_config

    _command_config.clear()
    if path:
        try:
            _command_config.update(command_config.load(path))
            command_config.to_authenticator(_command_config)  # refuse SASL settings that cannot work, up front
            command_config.check_stores(_command_config)  # and Java stores that cannot be read
        except ValueError as exc:
            raise CliError(str(exc)) from None


def command_properties() -> dict[str, str]:
    """The `--command-config` properties as given (Kafka client names)."""
    return dict(_command_config)


def add_bootstrap_option(parser: argparse.ArgumentParser) -> None:
    """Add `--bootstrap-server`, defaulting to $MOLDAU_BOOTSTRAP or the local broker."""
    default = os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP
    parser.add_argument(
        "--bootstrap-server",
        "-b",
        default=default,
        metavar="HOST:PORT",
        help=f"broker to connect to, comma-separated list allowed (default: ${BOOTSTRAP_ENV} or {default})",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="a Kafka client properties file (security.protocol, ssl.*, sasl.*) for a secured cluster",
    )


# A subcommand's entry point: parsed arguments in, exit status out.
Handler = Callable[[argparse.Namespace], int]


def add_action(actions: Any, name: str, handler: Handler, text: str) -> argparse.ArgumentParser:
    """Add one subcommand (`topics create`, `groups list`, ...) with the options every one of them takes."""
    parser: argparse.ArgumentParser = actions.add_parser(name, help=text, description=text)
    add_bootstrap_option(parser)
    parser.set_defaults(func=handler)
    return parser


def client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """The librdkafka settings every command starts from."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": "moldau-cli",
        # Telemetry pushes would only add noise to a broker's request log.
        "enable.metrics.push": False,
    }
    debug = os.environ.get(DEBUG_ENV)
    if debug:
        config["debug"] = debug
    else:
        # librdkafka logs every refused connection on stderr; the commands report failures themselves.
        config["log_level"] = 2
    if _command_config:
        from moldau.cli.command_config import to_librdkafka

        try:
            config.update(to_librdkafka(_command_config))
        except ValueError as exc:  # settings this command's client cannot use (a delegation token login)
            raise CliError(str(exc)) from None
    config.update(extra)
    return config


def bootstrap_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """Split a bootstrap list like `PLAINTEXT://a:9092,b:9093` into (host, port) pairs."""
    addresses = []
    for item in bootstrap.split(","):
        hostport = item.strip().rpartition("://")[2]
        host, _, port = hostport.rpartition(":")
        if not host or not ascii_digits(port):
            raise CliError(f"invalid bootstrap server '{item.strip()}', expected HOST:PORT")
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def check_reachable(bootstrap: str) -> None:
    """Fail fast with a clear message when no bootstrap server accepts connections.

    librdkafka would otherwise retry silently until a request times out.
    """
    reasons = []
    for host, port in bootstrap_addresses(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
                return
        except OSError as exc:
            reasons.append(exc.strerror or str(exc))
    raise CliError(f"cannot connect to {bootstrap}: {'; '.join(reasons)}")


def error_name(err: KafkaError) -> str:
    """The Kafka protocol name of an error code, or librdkafka's name for its local errors."""
    # Imported here, on the error path only: loading the protocol schema costs most of a second,
    # which every successful command would otherwise pay.
    from moldau.protocol.errors import ErrorCode

    code = err.code()
    # librdkafka's local errors are below -1 and have no protocol name.
    if code >= -1:
        try:
            return ErrorCode(code).name.upper()
        except ValueError:
            pass
    return str(err.name())


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The KafkaError carried by an exception raised by confluent-kafka, if any."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def describe_error(err: KafkaError) -> str:
    """A short human description followed by the error's name, e.g. `Broker: ... (NAME)`."""
    return f"{err.str()} ({error_name(err)})"


def topic_error(topic: str, err: KafkaError, action: str) -> CliError:
    """Turn a per-topic broker error into a one-line CLI error."""
    name = error_name(err)
    if name == "UNKNOWN_TOPIC_OR_PARTITION":
        return CliError(f"topic '{topic}' does not exist ({name})")
    if name == "TOPIC_ALREADY_EXISTS":
        return CliError(f"topic '{topic}' already exists ({name})")
    return CliError(f"cannot {action} topic '{topic}': {describe_error(err)}")


def request_failed(exc: BaseException, what: str) -> CliError:
    """Turn any failure of a client call into a one-line CLI error."""
    err = kafka_error(exc)
    # A bare TimeoutError from a future has an empty message; its type says what happened.
    detail = describe_error(err) if err is not None else (str(exc) or type(exc).__name__)
    return CliError(f"{what}: {detail}")


def plural(count: int, noun: str) -> str:
    """`1 record`, `2 records`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from epoch milliseconds or ISO 8601 (no zone means UTC)."""
    if ascii_digits(text):
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected ISO 8601 or epoch milliseconds, got '{text}'") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
