"""Connect's KafkaLog against a real broker: the end offsets of a topic that is not there yet when first asked
(as right after creating it on a cluster whose leader has not replayed the creation) are asked again until it is."""

from __future__ import annotations

import threading
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException

from moldau.connect.distributed.kafka_log import end_offset
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_produce, create_topic


def _client(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                     "allow.auto.create.topics": False})


def test_the_end_offset_of_a_topic_created_meanwhile_is_asked_again(shared_broker: BrokerProcess) -> None:
    bootstrap, topic = shared_broker.bootstrap, f"kafka-log-{uuid.uuid4().hex[:8]}"

    def create_later() -> None:
        create_topic(bootstrap, topic)
        ck_produce(bootstrap, topic, [{"value": b"one"}, {"value": b"two"}])

    creator = threading.Timer(1.0, create_later)
    client = _client(bootstrap)
    try:
        creator.start()
        assert end_offset(client, topic, 0, timeout_s=30) in (0, 2)  # asked again until the topic was there
        creator.join()
        assert end_offset(client, topic, 0, timeout_s=10) == 2
    finally:
        creator.cancel()
        client.close()


def test_a_topic_that_never_comes_fails_at_the_timeout(shared_broker: BrokerProcess) -> None:
    client = _client(shared_broker.bootstrap)
    try:
        with pytest.raises(KafkaException):
            end_offset(client, f"never-{uuid.uuid4().hex[:8]}", 0, timeout_s=1.5)
    finally:
        client.close()
