"""Moldau's own Kafka client, for the requests confluent-kafka's AdminClient cannot send (DescribeQuorum,
DescribeLogDirs, client quotas, the share-group APIs of KIP-932, ListGroups with group types): a `moldau.cli`
`Session` built from a console user's librdkafka settings, so it authenticates as that user exactly like the
user's AdminClient does.

Each console user has one such session (`ConsoleClients.native`), kept open between pages: its connections (one
per broker) are reused by every page and every refresh, and closed when the user signs out or the broker stops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from moldau.cli.command_config import to_authenticator, to_client_security
from moldau.cli.common import CliError, bootstrap_addresses
from moldau.cli.transactions_session import Session
from moldau.console.errors import ConsoleError
from moldau.net.client import ConnectionPool
from moldau.security.client_security import ClientSecurity

__all__ = ["ConsoleSession", "cli_failures"]


class ConsoleSession(Session):
    """A `Session` acting for one console user instead of the command line's `--command-config`."""

    def __init__(self, config: Mapping[str, Any], security: ClientSecurity | None = None) -> None:
        # Not Session.__init__: that one reads the command line's --command-config.
        props = {key: str(value) for key, value in config.items()}
        self.bootstrap = bootstrap_addresses(props["bootstrap.servers"])
        self.pool = ConnectionPool(props.get("client.id", "moldau-console"), security or to_client_security(props),
                                   to_authenticator(props))


@asynccontextmanager
async def cli_failures() -> AsyncIterator[None]:
    """The session's failures (CliError) as console errors with the HTTP status of the Kafka error they name."""
    try:
        yield
    except CliError as exc:
        raise ConsoleError(_status(str(exc)), str(exc)) from None


def _status(message: str) -> int:
    """The HTTP status of a CLI failure, by the Kafka error it names."""
    if "GROUP_ID_NOT_FOUND" in message:
        return 404
    if "NON_EMPTY_GROUP" in message:
        return 409  # conflicts with the group's state: it has members
    if "INVALID" in message:
        return 400
    if "AUTHORIZATION_FAILED" in message:
        return 403
    return 502
