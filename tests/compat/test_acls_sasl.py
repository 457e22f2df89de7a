"""ACLs for principals that SASL authenticates: `User:alice` may produce, `User:bob` may consume, each only where
the ACLs say, on a SASL_PLAINTEXT listener with real clients. `User:admin` is the super user that creates the
topics and, through `moldau acls --command-config`, the ACLs.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.support.sasl_broker import start_sasl_broker

TIMEOUT_S = 30
REPO = Path(__file__).resolve().parents[2]
TOPIC, OTHER = "sasl-orders", "sasl-private"


def conf(bootstrap: str, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


@pytest.fixture(scope="module")
def sasl_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = start_sasl_broker(tmp_path_factory.mktemp("acl-sasl"), ("alice", "bob"))
    bootstrap = broker.bootstrap
    try:
        admin = AdminClient(broker.conf("admin"))
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1), NewTopic(OTHER, 1, 1)]).values():
            future.result(timeout=TIMEOUT_S)
        properties = broker.admin_properties()
        for args in (["--allow-principal", "User:alice", "--producer", "--topic", TOPIC],
                     ["--allow-principal", "User:bob", "--consumer", "--topic", TOPIC, "--group", "bobs"]):
            done = subprocess.run([sys.executable, "-m", "moldau", "acls", "add", *args, "-b", bootstrap,
                                   "--command-config", str(properties)],
                                  capture_output=True, text=True, cwd=REPO, timeout=60)
            assert done.returncode == 0, done.stderr
        yield bootstrap
    finally:
        broker.stop()


def produce(bootstrap: str, user: str, topic: str) -> KafkaError | None:
    producer = Producer({**conf(bootstrap, user), "message.timeout.ms": 10_000, "retries": 0})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value=f"from {user}".encode(), on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(TIMEOUT_S)
    assert outcome
    return outcome[0]


def consume_one(bootstrap: str, user: str, group: str) -> tuple[bytes | None, KafkaError | None]:
    consumer = Consumer({**conf(bootstrap, user), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None:
                return (None, msg.error()) if msg.error() is not None else (msg.value(), None)
        return None, None
    finally:
        consumer.close()


def test_each_principal_does_only_what_its_acls_allow(sasl_bootstrap: str) -> None:
    assert produce(sasl_bootstrap, "alice", TOPIC) is None
    refused = produce(sasl_bootstrap, "bob", TOPIC)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    refused = produce(sasl_bootstrap, "alice", OTHER)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert consume_one(sasl_bootstrap, "bob", "bobs") == (b"from alice", None)
    value, error = consume_one(sasl_bootstrap, "alice", "bobs")
    assert value is None and error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_metadata_shows_each_principal_its_topics(sasl_bootstrap: str) -> None:
    def topics(user: str) -> set[str]:
        return set(AdminClient(conf(sasl_bootstrap, user)).list_topics(timeout=TIMEOUT_S).topics)

    assert {TOPIC, OTHER} <= topics("admin")
    assert TOPIC in topics("bob") and OTHER not in topics("bob")
    assert TOPIC in topics("alice") and OTHER not in topics("alice")
