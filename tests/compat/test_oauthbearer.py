"""SASL/OAUTHBEARER with the real clients, against a real identity provider over HTTP (tests/support/oauth.py).

One broker and one provider serve every test here. The broker has three listeners:

- PLAINTEXT, where topics and ACLs are made (ANONYMOUS is a super user there);
- SIGNED (SASL_PLAINTEXT), which takes tokens signed by a key of the provider's JWKS, for audience `moldau` and
  the provider's issuer (Kafka's OAuthBearerValidatorCallbackHandler);
- UNSECURED (SASL_PLAINTEXT), Kafka's default validator: unsigned tokens, which must carry the scope `kafka`.

ACLs apply to the token's subject: the topic `guarded` is open to `User:alice` only.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest

from moldau.net.ports import free_ports
from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, create_topic
from tests.support.connect_worker import read_topic, running_worker, wait_for
from tests.support.messages import offset_of
from tests.support.oauth import IdentityProvider, SigningKey, identity_provider, unsecured_token
from tests.support.raw_client import RawClient
from tests.support.sasl import handshake, metadata, records

JWKS_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
UNSECURED_JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                  'unsecuredValidatorRequiredScope="kafka";')


class OAuthBroker:
    def __init__(self, proc: BrokerProcess, idp: IdentityProvider, idp_url: str, signed: int, unsecured: int) -> None:
        self.proc = proc
        self.idp = idp
        self.idp_url = idp_url
        self.plain = proc.bootstrap
        self.signed = f"127.0.0.1:{signed}"
        self.unsecured = f"127.0.0.1:{unsecured}"

    def conf(self, token: Any, listener: str | None = None, **extra: Any) -> dict[str, Any]:
        """librdkafka settings that log in with the token `token()` returns (its oauth_cb)."""
        def oauth_cb(_config: str) -> tuple[str, float, str]:
            value = token()
            return value, time.time() + 60, "ignored-by-the-broker"
        return {"bootstrap.servers": listener or self.signed, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb, **extra}

    def log_count(self, text: str) -> int:
        return self.proc.log_path.read_text(errors="replace").count(text)


@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthBroker]:
    plain, signed, unsecured = free_ports(3)
    with identity_provider() as (idp, url):
        proc = BrokerProcess(tmp_path_factory.mktemp("oauth"), {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SIGNED://127.0.0.1:{signed},"
                         f"UNSECURED://127.0.0.1:{unsecured}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SIGNED:SASL_PLAINTEXT,UNSECURED:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": JWKS_HANDLER,
            "sasl.oauthbearer.jwks.endpoint.url": f"{url}/jwks",
            "sasl.oauthbearer.expected.audience": "moldau",
            "sasl.oauthbearer.expected.issuer": "https://idp.example.test",
            "listener.name.unsecured.oauthbearer.sasl.jaas.config": UNSECURED_JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
            "super.users": "User:ANONYMOUS",
        }, port=plain)
        proc.start()
        try:
            create_topic(proc.bootstrap, "guarded")
            admin = AdminClient({"bootstrap.servers": proc.bootstrap})
            bindings = [AclBinding(ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL, "User:alice", "*",
                                   op, AclPermissionType.ALLOW)
                        for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)]
            for future in admin.create_acls(bindings).values():
                future.result(timeout=30)
            yield OAuthBroker(proc, idp, url, signed, unsecured)
        finally:
            proc.stop()
            proc.cleanup()


def new_topic(broker: OAuthBroker, prefix: str) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(broker.plain, topic)
    return topic


def round_trip(conf: dict[str, Any], topic: str, n: int = 5) -> list[bytes]:
    """Produce `records(n)` with confluent-kafka and read them back with a consumer of the same settings."""
    producer = Producer({**conf, "linger.ms": 5, "message.timeout.ms": 20_000})
    failed: list[Any] = []
    for r in records(n):
        producer.produce(topic, r["value"], r["key"], on_delivery=lambda err, _msg: failed.append(err) if err else None)
    assert producer.flush(30) == 0 and not failed, failed
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None and (value := msg.value()) is not None:
                values.append(value)
        return values
    finally:
        consumer.close()


def expected(n: int = 5) -> list[bytes]:
    return [r["value"] for r in records(n)]


def auth_errors(conf: dict[str, Any], topic: str, wait_s: float = 15.0) -> list[KafkaError]:
    """Produce one record and collect the errors the client reports while it cannot authenticate."""
    errors: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": errors.append, "message.timeout.ms": 3000})
    producer.produce(topic, value=b"never")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        producer.poll(0.2)
    producer.purge()
    producer.flush(5)
    return [e for e in errors if e.code() == KafkaError._AUTHENTICATION]


# -- signed tokens (KIP-768) -------------------------------------------------------------------------------------

def test_confluent_kafka_with_signed_tokens(oauth_broker: OAuthBroker) -> None:
    key = oauth_broker.idp.keys[-1]
    topic = new_topic(oauth_broker, "signed")
    assert round_trip(oauth_broker.conf(lambda: key.token("alice")), topic) == expected()


def test_librdkafka_oidc_client_credentials(oauth_broker: OAuthBroker) -> None:
    """librdkafka fetches the token itself from the provider's token endpoint (`sasl.oauthbearer.method=oidc`)."""
    oauth_broker.idp.clients["svc-orders"] = ("orders-secret", "svc-orders")
    issued_before = oauth_broker.idp.tokens_issued
    conf = {"bootstrap.servers": oauth_broker.signed, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "svc-orders", "sasl.oauthbearer.client.secret": "orders-secret",
            "sasl.oauthbearer.token.endpoint.url": f"{oauth_broker.idp_url}/token"}
    topic = new_topic(oauth_broker, "oidc")
    assert round_trip(conf, topic) == expected()
    assert oauth_broker.idp.tokens_issued > issued_before


@pytest.mark.parametrize("make_token", [
    pytest.param(lambda key: key.token("alice", -120), id="expired"),
    pytest.param(lambda key: key.token("alice", aud="someone-else"), id="other-audience"),
    pytest.param(lambda key: key.token("alice", iss="https://evil.example"), id="other-issuer"),
    pytest.param(lambda key: SigningKey(key.kid).token("alice"), id="forged-signature"),
    pytest.param(lambda key: unsecured_token("alice", scope=["kafka"]), id="unsigned"),
])
def test_invalid_tokens_are_refused_and_others_still_served(oauth_broker: OAuthBroker, make_token: Any) -> None:
    key = oauth_broker.idp.keys[-1]
    topic = new_topic(oauth_broker, "refused")
    errors = auth_errors(oauth_broker.conf(lambda: make_token(key)), topic)
    assert errors and "invalid_token" in str(errors[0]), errors
    assert round_trip(oauth_broker.conf(lambda: key.token("alice")), topic) == expected()


def test_acls_apply_to_the_tokens_subject(oauth_broker: OAuthBroker) -> None:
    key = oauth_broker.idp.keys[-1]
    assert round_trip(oauth_broker.conf(lambda: key.token("alice")), "guarded", 3) == expected(3)
    failures: list[Any] = []
    producer = Producer({**oauth_broker.conf(lambda: key.token("bob")), "message.timeout.ms": 10_000})
    producer.produce("guarded", value=b"x", on_delivery=lambda err, _msg: failures.append(err))
    producer.flush(20)
    assert failures and failures[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_rotated_key_is_fetched_when_a_token_first_names_it(oauth_broker: OAuthBroker) -> None:
    idp = oauth_broker.idp
    fetches_before = idp.jwks_fetches
    key = idp.rotate(f"key-{uuid.uuid4().hex[:6]}")
    topic = new_topic(oauth_broker, "rotated")
    # The first attempt names a key the broker does not hold: refused, and the JWKS is fetched again at once;
    # librdkafka's reconnection then succeeds.
    assert round_trip(oauth_broker.conf(lambda: key.token("alice")), topic) == expected()
    assert idp.jwks_fetches > fetches_before


# -- the session a token's lifetime bounds (KIP-368) -------------------------------------------------------------

def _authenticate(client: RawClient, token: str) -> Any:
    assert handshake(client, "OAUTHBEARER").error_code == ErrorCode.none
    return client.request(SaslAuthenticateRequest(auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()))


def test_the_session_ends_when_the_token_expires(oauth_broker: OAuthBroker) -> None:
    key = oauth_broker.idp.keys[-1]
    with RawClient(oauth_broker.signed) as client:
        # The provider's clock and the broker's are the same here; the token has 2 s left.
        answer = _authenticate(client, key.token("alice", 2, now=time.time()))
        assert answer.error_code == ErrorCode.none
        assert 0 < answer.session_lifetime.total_seconds() <= 2
        assert metadata(client).brokers
        time.sleep(2.2)
        client.send_raw(client.encode(MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                                      include_topic_authorized_operations=False)))
        assert client.is_closed_by_peer()


def test_raw_refusal_is_json_then_an_error_after_control_a(oauth_broker: OAuthBroker) -> None:
    with RawClient(oauth_broker.signed) as client:
        challenge = _authenticate(client, oauth_broker.idp.keys[-1].token("alice", -300))
        assert challenge.error_code == ErrorCode.none and challenge.auth_bytes == b'{"status":"invalid_token"}'
        final = client.request(SaslAuthenticateRequest(auth_bytes=b"\x01"))
        assert final.error_code == ErrorCode.sasl_authentication_failed
        assert final.error_message == '{"status":"invalid_token"}'
        assert client.is_closed_by_peer()


def test_librdkafka_reauthenticates_before_its_tokens_expire(oauth_broker: OAuthBroker) -> None:
    key = oauth_broker.idp.keys[-1]
    topic = new_topic(oauth_broker, "reauth")
    expired_before = oauth_broker.log_count("after the SASL session expired")
    issued: list[float] = []

    def oauth_cb(_config: str) -> tuple[str, float, str]:
        # Tokens last 4 s; librdkafka is told 2 s, so it fetches the next one well before the broker ends the
        # session (as with real lifetimes: librdkafka refreshes at 80 %, re-authenticates at 90 % of the session).
        now = time.time()
        issued.append(now)
        return key.token("alice", 4, now=now), now + 2, "alice"

    delivered: list[int] = []
    producer = Producer({"bootstrap.servers": oauth_broker.signed, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb, "linger.ms": 5})
    start = time.monotonic()
    for i in range(70):  # 7 s: more than two token lifetimes
        producer.produce(topic, value=str(i).encode(), on_delivery=lambda err, msg: delivered.append(
            -1 if err else offset_of(msg)))
        while time.monotonic() < start + (i + 1) / 10:
            producer.poll(0.02)
    assert producer.flush(30) == 0
    assert sorted(delivered) == list(range(70))
    assert len(issued) >= 3, "librdkafka refreshed its token"
    assert oauth_broker.log_count("after the SASL session expired") == expired_before


# -- Kafka's unsecured validator, and the Python clients ----------------------------------------------------------

def test_librdkafka_unsecured_tokens_on_the_unsecured_listener(oauth_broker: OAuthBroker) -> None:
    conf = {"bootstrap.servers": oauth_broker.unsecured, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=carol scope=kafka,other"}
    topic = new_topic(oauth_broker, "unsecured")
    assert round_trip(conf, topic) == expected()
    without_scope = {**conf, "sasl.oauthbearer.config": "principal=carol scope=other"}
    errors = auth_errors(without_scope, topic)
    assert errors and "insufficient_scope" in str(errors[0]), errors


def test_kafka_python_with_a_token_provider(oauth_broker: OAuthBroker) -> None:
    from kafka.net.sasl.oauth import AbstractTokenProvider

    from tests.support.sasl import kafka_python_round_trip

    key = oauth_broker.idp.keys[-1]

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return key.token("kp-user")

    topic = new_topic(oauth_broker, "kp-oauth")
    auth = {"bootstrap_servers": oauth_broker.signed, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Provider()}
    assert kafka_python_round_trip(auth, topic, 5) == expected()


def test_python_clients_outlive_their_tokens(oauth_broker: OAuthBroker) -> None:
    """Tokens of 2 s, records sent for 5 s. kafka-python re-authenticates (KIP-368) with a new token before its
    session ends; aiokafka cannot, so the broker closes its connection at the first request after the token
    expired and it reconnects with a new one. Neither loses a record."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider as AsyncTokenProvider
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    key = oauth_broker.idp.keys[-1]
    tokens: dict[str, int] = {"kafka-python": 0, "aiokafka": 0}

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            tokens["kafka-python"] += 1
            return key.token("kp-user", 2)

    class AsyncProvider(AsyncTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            tokens["aiokafka"] += 1
            return key.token("aio-user", 2)

    topic = new_topic(oauth_broker, "py-expiring")
    auth = {"bootstrap_servers": oauth_broker.signed, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER"}
    expired_before = oauth_broker.log_count("after the SASL session expired")
    producer = KafkaProducer(**auth, sasl_oauth_token_provider=Provider(), retries=5)
    for i in range(20):
        producer.send(topic, value=b"kafka-python %d" % i).get(timeout=30)
        time.sleep(0.25)
    producer.close()
    assert oauth_broker.log_count("after the SASL session expired") == expired_before

    async def aiokafka_sends() -> None:
        async_producer = AIOKafkaProducer(**auth, sasl_oauth_token_provider=AsyncProvider())
        await async_producer.start()
        try:
            for i in range(20):
                await async_producer.send_and_wait(topic, value=b"aiokafka %d" % i)
                await asyncio.sleep(0.25)
        finally:
            await async_producer.stop()
    asyncio.run(aiokafka_sends())

    got = ck_consume(oauth_broker.plain, topic, 40)
    assert sorted(r.value or b"" for r in got) == sorted(
        [b"kafka-python %d" % i for i in range(20)] + [b"aiokafka %d" % i for i in range(20)])
    assert tokens["kafka-python"] >= 2 and tokens["aiokafka"] >= 2, tokens
    assert oauth_broker.log_count("after the SASL session expired") > expired_before


def test_aiokafka_with_a_token_provider(oauth_broker: OAuthBroker) -> None:
    from aiokafka.abc import AbstractTokenProvider

    from tests.support.sasl import aiokafka_round_trip

    key = oauth_broker.idp.keys[-1]

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            await asyncio.sleep(0)
            return key.token("aio-user")

    topic = new_topic(oauth_broker, "aio-oauth")
    auth = {"bootstrap_servers": oauth_broker.signed, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Provider()}
    assert aiokafka_round_trip(auth, topic, 5) == expected()


def test_a_broker_whose_provider_is_down_starts_and_serves_once_it_is_up(tmp_path: Path) -> None:
    """The first fetch fails: the broker starts anyway, refuses tokens, and retries with backoff until the
    provider answers."""
    plain, signed = free_ports(2)
    key = SigningKey("k1")
    jwks_file = tmp_path / "jwks.json"  # a file: URL that appears later stands in for a provider coming up
    proc = BrokerProcess(tmp_path, {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SIGNED://127.0.0.1:{signed}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SIGNED:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": JWKS_HANDLER,
        "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "500",
    }, port=plain)
    proc.start()
    try:
        with RawClient(f"127.0.0.1:{signed}") as client:
            assert _authenticate(client, key.token("alice")).auth_bytes == b'{"status":"invalid_token"}'
        jwks_file.write_text(json.dumps({"keys": [key.jwk()]}))
        deadline = time.monotonic() + 10
        while True:
            with RawClient(f"127.0.0.1:{signed}") as client:
                answer = _authenticate(client, key.token("alice"))
                if answer.auth_bytes == b"" and answer.error_code == ErrorCode.none:
                    assert metadata(client).brokers
                    break
            assert time.monotonic() < deadline, proc.log_tail()
            time.sleep(0.2)
        assert "cannot read the JWKS" in proc.log_path.read_text()
    finally:
        proc.stop()
        proc.cleanup()


# -- Moldau's own clients log in with OAUTHBEARER too ------------------------------------------------------------

def cli(broker: OAuthBroker, properties: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau", *args, "-b", broker.signed, "--command-config",
                           str(properties)], capture_output=True, text=True, timeout=90)


def test_the_cli_logs_in_with_client_credentials_on_each_of_its_clients(oauth_broker: OAuthBroker,
                                                                         tmp_path: Path) -> None:
    """A Java client's properties: the token endpoint, and the client's id and secret in the JAAS config. The
    CLI's three clients take them: librdkafka (`topics`), kafka-python (`partitions log-dirs`) and Moldau's own
    (`quotas`, `features`)."""
    oauth_broker.idp.clients["moldau-cli"] = ("cli-secret", "alice")
    issued_before = oauth_broker.idp.tokens_issued
    properties = tmp_path / "oauth.properties"
    properties.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        f"sasl.oauthbearer.token.endpoint.url={oauth_broker.idp_url}/token\n"
        "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
        "OAuthBearerLoginCallbackHandler\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="moldau-cli" clientSecret="cli-secret";\n')
    for args in (("topics", "list"), ("partitions", "log-dirs"), ("quotas", "describe"), ("features", "describe")):
        result = cli(oauth_broker, properties, *args)
        assert result.returncode == 0, (args, result.stderr)
    assert "guarded" in cli(oauth_broker, properties, "topics", "list").stdout
    assert oauth_broker.idp.tokens_issued >= issued_before + 4

    wrong = tmp_path / "wrong.properties"
    wrong.write_text(properties.read_text().replace("cli-secret", "not-it"))
    refused = cli(oauth_broker, wrong, "quotas", "describe")
    assert refused.returncode == 1 and "invalid_client" in refused.stderr + refused.stdout, refused


def test_the_cli_with_unsecured_tokens_is_refused_by_a_listener_that_wants_signed_ones(
        oauth_broker: OAuthBroker, tmp_path: Path) -> None:
    properties = tmp_path / "unsecured.properties"
    properties.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="carol" unsecuredLoginListClaim_scope=",kafka";\n')
    refused = cli(oauth_broker, properties, "quotas", "describe")
    assert refused.returncode == 1 and "invalid_token" in refused.stderr, refused
    accepted = subprocess.run([sys.executable, "-m", "moldau", "quotas", "describe", "-b", oauth_broker.unsecured,
                               "--command-config", str(properties)], capture_output=True, text=True, timeout=90)
    assert accepted.returncode == 0, accepted.stderr


def test_a_connect_worker_logs_in_with_client_credentials(oauth_broker: OAuthBroker, tmp_path: Path) -> None:
    """A standalone worker whose settings are Kafka Connect's (the Java client's OAUTHBEARER login): a file
    source writes through the SIGNED listener, and the records are there."""
    oauth_broker.idp.clients["connect"] = ("connect-secret", "connect-worker")
    topic = new_topic(oauth_broker, "connect-oauth")
    source = tmp_path / "in.txt"
    source.write_text("".join(f"line {i}\n" for i in range(5)))
    login = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
             "sasl.oauthbearer.token.endpoint.url": f"{oauth_broker.idp_url}/token",
             "sasl.login.callback.handler.class":
                 "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
             "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                                 'clientId="connect" clientSecret="connect-secret";'}
    with running_worker(tmp_path / "worker", oauth_broker.signed, login) as worker:
        assert worker.request("POST", "/connectors", {"name": "oauth-source", "config": {
            "connector.class": "FileStreamSource", "file": str(source), "topic": topic}})[0] == 201
        wait_for(lambda: len(read_topic(oauth_broker.plain, topic)) == 5, what="the lines in the topic")
    assert [value for _key, value in read_topic(oauth_broker.plain, topic)] == [
        f"line {i}".encode() for i in range(5)]
