"""Moldau's own Kafka client for the requests confluent-kafka's AdminClient cannot send yet (the share-group
APIs of KIP-932, ListGroups with group types): a `moldau.cli` `Session` built from a console user's librdkafka
settings, so it authenticates as that user exactly like the user's AdminClient does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from moldau.cli.command_config import to_authenticator, to_client_security
from moldau.cli.common import CliError, bootstrap_addresses
from moldau.cli.transactions_session import Session
from moldau.console.clients import ConsoleClients
from moldau.console.errors import ConsoleError
from moldau.net.client import ConnectionPool

__all__ = ["ConsoleSession", "console_session"]


class ConsoleSession(Session):
    """A `Session` acting for one console user instead of the command line's `--command-config`."""

    def __init__(self, clients: ConsoleClients) -> None:
        # Not Session.__init__: that one reads the command line's --command-config.
        props = {key: str(value) for key, value in clients.config().items()}
        self.bootstrap = bootstrap_addresses(props["bootstrap.servers"])
        self.pool = ConnectionPool("moldau-console", to_client_security(props), to_authenticator(props))


@asynccontextmanager
async def console_session(clients: ConsoleClients) -> AsyncIterator[ConsoleSession]:
    """A session for the length of one page; its failures (CliError) become console errors with the HTTP status
    of the Kafka error they name."""
    session = ConsoleSession(clients)
    try:
        yield session
    except CliError as exc:
        raise ConsoleError(_status(str(exc)), str(exc)) from None
    finally:
        session.close()


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
