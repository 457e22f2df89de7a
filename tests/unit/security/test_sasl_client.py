"""The broker's SASL client against the broker's SASL server state machine, in process."""

import asyncio
import base64
import datetime
from typing import Any

import pytest
import scramp
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.static.primitive import i64Timedelta

from moldau.clock import ManualClock
from moldau.config import BrokerConfig, ConfigError
from moldau.security.principal import ANONYMOUS, KafkaPrincipal
from moldau.security.sasl.authenticator import SaslAuthenticator, SaslListenerConfig
from moldau.security.sasl.client import (
    SaslClientConfig,
    SaslClientError,
    authenticate,
    controller_sasl,
    inter_broker_sasl,
)
from moldau.security.sasl.scram import ScramCredential
from moldau.security.sasl.settings import sasl_listener_config

CRED = ScramCredential(*scramp.ScramMechanism("SCRAM-SHA-512").make_auth_info("broker-secret", 4096))


class Conn:
    principal: KafkaPrincipal = ANONYMOUS


def _server() -> tuple[SaslAuthenticator, Conn]:
    conn = Conn()
    config = SaslListenerConfig(("PLAIN", "SCRAM-SHA-512"), {"broker": "broker-secret"},
                                lambda m, u: CRED if (m, u) == ("SCRAM-SHA-512", "broker") else None, 60_000)
    return SaslAuthenticator(config, conn, ManualClock()), conn


def _send(server: SaslAuthenticator) -> Any:
    async def send(request: Any) -> Any:
        if request.__api_key__ == 17:
            result = server.handshake(request.mechanism, request.__version__)
            return SaslHandshakeResponse(error_code=result.error_code, mechanisms=result.mechanisms)
        answer = server.authenticate_request() or server.evaluate(request.auth_bytes)
        return SaslAuthenticateResponse(error_code=answer.error_code, error_message=answer.error_message,
                                        auth_bytes=answer.token,
                                        session_lifetime=i64Timedelta.parse(datetime.timedelta(milliseconds=answer.session_lifetime_ms)))
    return send


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_client_authenticates(mechanism: str) -> None:
    server, conn = _server()
    lifetime = asyncio.run(authenticate(SaslClientConfig(mechanism, "broker", "broker-secret"), _send(server)))
    assert lifetime == 60_000 and conn.principal == KafkaPrincipal.user("broker")


@pytest.mark.parametrize("mechanism,password", [("PLAIN", "nope"), ("SCRAM-SHA-512", "nope"),
                                                ("SCRAM-SHA-256", "broker-secret")])
def test_client_refused(mechanism: str, password: str) -> None:
    server, conn = _server()
    with pytest.raises(SaslClientError):
        asyncio.run(authenticate(SaslClientConfig(mechanism, "broker", password), _send(server)))
    assert conn.principal == ANONYMOUS


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret";')


def test_inter_broker_settings() -> None:
    base = {"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094"}
    assert inter_broker_sasl(BrokerConfig(base)) is None  # the first listener, PLAINTEXT, is inter-broker
    sasl = {**base, "inter.broker.listener.name": "SASL_PLAINTEXT"}
    with pytest.raises(ConfigError, match="GSSAPI"):
        inter_broker_sasl(BrokerConfig(sasl))
    sasl["sasl.mechanism.inter.broker.protocol"] = "PLAIN"
    with pytest.raises(ConfigError, match="username and password"):
        inter_broker_sasl(BrokerConfig(sasl))
    sasl["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = JAAS
    assert inter_broker_sasl(BrokerConfig(sasl)) == SaslClientConfig("PLAIN", "admin", "admin-secret")
    # Kafka's older way of naming it: the listener named after security.inter.broker.protocol.
    del sasl["inter.broker.listener.name"]
    sasl["security.inter.broker.protocol"] = "SASL_PLAINTEXT"
    assert inter_broker_sasl(BrokerConfig(sasl)) == SaslClientConfig("PLAIN", "admin", "admin-secret")


def test_controller_settings() -> None:
    base = {"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "controller.listener.names": "CONTROLLER"}
    assert controller_sasl(BrokerConfig(base)) is None  # CONTROLLER maps to PLAINTEXT by default
    sasl = {**base, "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"}
    with pytest.raises(ConfigError, match="GSSAPI is not supported"):
        controller_sasl(BrokerConfig(sasl))
    sasl["sasl.mechanism.controller.protocol"] = "SCRAM-SHA-256"
    with pytest.raises(ConfigError, match="set it to PLAIN"):
        controller_sasl(BrokerConfig(sasl))
    sasl["sasl.mechanism.controller.protocol"] = "PLAIN"
    with pytest.raises(ConfigError, match="username and password"):
        controller_sasl(BrokerConfig(sasl))
    sasl["listener.name.controller.plain.sasl.jaas.config"] = JAAS
    assert controller_sasl(BrokerConfig(sasl)) == SaslClientConfig("PLAIN", "admin", "admin-secret")


def test_a_controller_listener_offers_plain_only() -> None:
    props = {"listeners": "CONTROLLER://127.0.0.1:9093", "controller.listener.names": "CONTROLLER",
             "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "listener.name.controller.plain.sasl.jaas.config": JAAS}
    config = BrokerConfig(props)
    assert sasl_listener_config(config, "CONTROLLER", lambda *_: None, controller=True).mechanisms == ("PLAIN",)
    scram_only = BrokerConfig({**props, "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    with pytest.raises(ConfigError, match="PLAIN only"):
        sasl_listener_config(scram_only, "CONTROLLER", lambda *_: None, controller=True)


def test_client_logs_in_with_a_delegation_token_as_its_owner() -> None:
    """Moldau's client sends `tokenauth=true` (a Java JAAS config's tokenauth="true") and signs the message with it."""
    from types import SimpleNamespace

    from moldau.metadata.records import DelegationTokenRecord
    from moldau.security.delegation_tokens import TokenCredentials, token_hmac

    record = DelegationTokenRecord("tok", "User:alice", "User:alice", (), 0, 10_000, 10_000)
    image = SimpleNamespace(delegation_tokens={"tok": record})
    tokens = TokenCredentials("secret", lambda: image, lambda: 4_000)  # type: ignore[arg-type, return-value]
    conn = Conn()
    config = SaslListenerConfig(("SCRAM-SHA-512",), {}, lambda m, u: None, 0, delegation_tokens=tokens.lookup)
    server = SaslAuthenticator(config, conn, ManualClock(start_ms=4_000))
    hmac = base64.b64encode(token_hmac("secret", "tok")).decode()
    lifetime = asyncio.run(authenticate(SaslClientConfig("SCRAM-SHA-512", "tok", hmac, token_auth=True),
                                        _send(server)))
    assert lifetime == 6_000  # the session ends when the token does
    assert conn.principal == KafkaPrincipal.user("alice") and conn.principal.token_authenticated
    with pytest.raises(SaslClientError):  # the same credentials without the extension: not a user
        asyncio.run(authenticate(SaslClientConfig("SCRAM-SHA-512", "tok", hmac), _send(_server()[0])))
