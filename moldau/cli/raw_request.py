"""One request with Moldau's own protocol client, for the tools whose APIs the Python clients do not expose
(UpdateFeatures, UnregisterBroker, the telemetry and client quota APIs). `--command-config FILE` gives
`client.id` and TLS/SASL."""

from __future__ import annotations

import asyncio
from typing import Any

from moldau.cli.command_config import to_authenticator, to_client_security
from moldau.cli.common import REQUEST_TIMEOUT_S, CliError, bootstrap_addresses, command_properties
from moldau.net.client import ClientConnection, ConnectionFailed


def call(bootstrap: str, request: Any) -> Any:
    """The response to `request` from the first bootstrap address. Raises CliError when it cannot be reached."""
    host, port = bootstrap_addresses(bootstrap)[0]

    async def run() -> Any:
        props = command_properties()
        conn = ClientConnection(host, port, props.get("client.id", "moldau-cli"), to_client_security(props),
                                to_authenticator(props))
        try:
            return await conn.request(request, REQUEST_TIMEOUT_S)
        finally:
            conn.close()
    try:
        return asyncio.run(run())
    except (ConnectionFailed, TimeoutError) as exc:
        raise CliError(f"cannot reach {host}:{port}: {exc or 'timed out'}") from None


def check(code: Any, message: str | None, what: str | None = None) -> None:
    """Raise the response's error, named as Kafka names it (after `what` failed, when given), unless it is none."""
    if int(code.value if hasattr(code, "value") else code) != 0:
        raise CliError(f"{what + ': ' if what else ''}{code.name.upper()}: {message or code.name}")
