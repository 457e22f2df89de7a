"""Delegation token helpers for the compat and cluster tests: `moldau delegation-tokens` as a user, a SCRAM login
with a token (Moldau's own client), and kafka-python logging in with a token.

Tokens are dicts as `delegation-tokens ... -o json` prints them: token_id, hmac (base64), owner, requester, ...
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kio.schema.metadata.v12.request import MetadataRequest

from moldau.net.client import ClientConnection, ConnectionFailed
from moldau.security.sasl.client import SaslClientConfig, authenticate

REPO = Path(__file__).resolve().parents[2]
Token = dict[str, str]


def plain_properties(directory: Path, user: str, user_password: str) -> Path:
    """A client properties file logging in with SASL/PLAIN as `user`."""
    path = directory / f"{user}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="{user}" password="{user_password}";\n')
    return path


def token_properties(directory: Path, token: Token) -> Path:
    """A Java client's way of logging in with a token: ScramLoginModule with tokenauth="true"."""
    path = directory / f"token-{token['token_id']}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{token["token_id"]}" password="{token["hmac"]}" tokenauth="true";\n')
    return path


def token_cli(bootstrap: str, config: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "moldau", "delegation-tokens", *args, "-b", bootstrap]
    if config is not None:
        command += ["--command-config", str(config)]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=60)


def create_token(bootstrap: str, config: Path, *args: str) -> Token:
    done = token_cli(bootstrap, config, "create", "-o", "json", *args)
    assert done.returncode == 0, done.stderr
    rows: list[Token] = json.loads(done.stdout)
    assert len(rows) == 1
    return rows[0]


def describe_tokens(bootstrap: str, config: Path, *args: str) -> list[Token]:
    done = token_cli(bootstrap, config, "describe", "-o", "json", *args)
    assert done.returncode == 0, done.stderr
    rows: list[Token] = json.loads(done.stdout)
    return rows


def logs_in(bootstrap: str, config: SaslClientConfig) -> bool:
    """A SASL login with Moldau's own client and one request after it; False when refused."""
    host, port = bootstrap.rsplit(":", 1)

    async def run() -> bool:
        conn = ClientConnection(host, int(port), "token-test", authenticator=lambda send: authenticate(config, send))
        try:
            await conn.request(MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False), 10)
            return True
        except ConnectionFailed:
            return False
        finally:
            conn.close()
    return asyncio.run(run())


def token_logs_in(bootstrap: str, token: Token, mechanism: str = "SCRAM-SHA-256") -> bool:
    return logs_in(bootstrap, SaslClientConfig(mechanism, token["token_id"], token["hmac"], token_auth=True))


@contextmanager
def kafka_python_token_logins(mechanism: str) -> Iterator[None]:
    """kafka-python's SCRAM for `mechanism`, with `tokenauth=true` in its first message, while the block runs
    (through kafka-python's public hook for SASL mechanisms)."""
    from kafka.net import sasl
    from kafka.net.sasl.scram import SaslMechanismScram, ScramClient

    class TokenScramClient(ScramClient):  # type: ignore[misc]
        def first_message(self) -> bytes:
            bare: bytes = b"n=" + self.user + b",r=" + self.nonce + b",tokenauth=true"
            self.auth_message += bare
            return b"n,," + bare

    class TokenScram(SaslMechanismScram):  # type: ignore[misc]
        def __init__(self, **config: Any) -> None:
            super().__init__(**config)
            self._scram_client = TokenScramClient(config["sasl_plain_username"], config["sasl_plain_password"],
                                                  config["sasl_mechanism"])

    original = sasl.get_sasl_mechanism(mechanism)
    sasl.register_sasl_mechanism(mechanism, TokenScram, overwrite=True)
    try:
        yield
    finally:
        sasl.register_sasl_mechanism(mechanism, original, overwrite=True)
