"""`/metrics` on the console listener of a real broker, parsed with prometheus-client's own parser after a known
workload made with the real clients: exact counts where the workload fixes them."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_END, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from tests.support.broker_process import BrokerProcess
from tests.support.cli_runner import ok
from tests.support.clients import ck_consume, ck_produce, create_topic
from tests.support.metrics_scrape import Scrape
from tests.support.polling import wait_until
from tests.support.quota_rates import produce_for
from tests.support.raw_client import RawClient


@pytest.fixture(scope="module")
def topic(shared_broker: BrokerProcess) -> Iterator[str]:
    name = f"metrics-{uuid.uuid4().hex[:8]}"
    create_topic(shared_broker.bootstrap, name, partitions=2)
    yield name


def test_records_and_bytes_in_and_out_per_topic(shared_broker: BrokerProcess, topic: str) -> None:
    records = [{"key": f"k{i}".encode(), "value": b"x" * 100, "partition": i % 2} for i in range(30)]
    ck_produce(shared_broker.bootstrap, topic, records)
    scrape = Scrape(shared_broker.metrics_url)
    assert scrape.types["kafka_server_brokertopicmetrics_messagesin"] == "counter"
    assert scrape.value("kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 30
    # Batches are stored as they were sent, so the bytes in are exactly what the logs hold.
    size = sum(scrape.value("kafka_log_log_size", topic=topic, partition=str(p)) for p in (0, 1))
    assert scrape.value("kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == size > 3000
    # The unlabelled sample is every topic's total.
    assert scrape.value("kafka_server_brokertopicmetrics_messagesin_total") >= 30
    assert [scrape.value("kafka_log_log_logendoffset", topic=topic, partition=str(p)) for p in (0, 1)] == [15, 15]
    assert scrape.get("kafka_server_brokertopicmetrics_bytesout_total", topic=topic) in (None, 0)
    ck_consume(shared_broker.bootstrap, topic, 30)
    after = Scrape(shared_broker.metrics_url)
    assert after.value("kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= size


def test_requests_are_counted_by_api_and_version_with_latency(shared_broker: BrokerProcess, topic: str) -> None:
    before = Scrape(shared_broker.metrics_url)

    def produce_requests(scrape: Scrape) -> float:
        return sum(v for labels, v in scrape.samples.get("kafka_network_requestmetrics_requests_total", {}).items()
                   if ("request", "Produce") in labels)

    ck_produce(shared_broker.bootstrap, topic, [{"value": b"one", "partition": 0}])
    after = Scrape(shared_broker.metrics_url)
    assert produce_requests(after) >= produce_requests(before) + 1
    assert after.types["kafka_network_requestmetrics_totaltime_seconds"] == "histogram"
    buckets = sorted(((float(dict(labels)["le"]), v) for labels, v in
                      after.samples["kafka_network_requestmetrics_totaltime_seconds_bucket"].items()
                      if ("request", "Produce") in labels))
    counts = [v for _, v in buckets]
    assert counts == sorted(counts) and buckets[-1][0] == float("inf") and buckets[0][0] == 0.0005
    assert counts[-1] == after.value("kafka_network_requestmetrics_totaltime_seconds_count", request="Produce")
    # The JMX exporter's shape of Kafka's TotalTimeMs: percentiles as quantile labels, in ms.
    assert after.types["kafka_network_requestmetrics_totaltimems"] == "summary"
    assert after.value("kafka_network_requestmetrics_totaltimems_count", request="Produce") == counts[-1]
    total_ms = after.value("kafka_network_requestmetrics_totaltimems_sum", request="Produce")
    assert total_ms > 0
    assert after.value("kafka_network_requestmetrics_totaltime_seconds_sum", request="Produce") == \
        pytest.approx(total_ms / 1000)
    quantiles = [after.value("kafka_network_requestmetrics_totaltimems", request="Produce", quantile=q)
                 for q in ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999")]
    assert quantiles[0] > 0 and quantiles == sorted(quantiles), quantiles


def test_consumer_lag_as_kafka_exporter_names_it(shared_broker: BrokerProcess, topic: str) -> None:
    group = f"lagging-{uuid.uuid4().hex[:6]}"
    scrape = Scrape(shared_broker.metrics_url)
    ends = [int(scrape.value("kafka_topic_partition_current_offset", topic=topic, partition=str(p))) for p in (0, 1)]
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, ends[1])], asynchronous=False)
        labels = {"consumergroup": group, "topic": topic}
        lagging = Scrape(shared_broker.metrics_url)
        assert lagging.value("kafka_consumergroup_current_offset", **labels, partition="0") == 3
        assert lagging.value("kafka_consumergroup_lag", **labels, partition="0") == ends[0] - 3
        assert lagging.value("kafka_consumergroup_lag", **labels, partition="1") == 0
        assert lagging.value("kafka_consumergroup_lag_sum", **labels) == ends[0] - 3
        assert lagging.value("kafka_topic_partition_oldest_offset", topic=topic, partition="0") == 0
        consumer.commit(offsets=[TopicPartition(topic, 0, ends[0])], asynchronous=False)
        assert Scrape(shared_broker.metrics_url).value("kafka_consumergroup_lag_sum", **labels) == 0
    finally:
        consumer.close()


def test_node_partition_controller_and_quorum_gauges(shared_broker: BrokerProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    topics = admin.list_topics(timeout=10).topics
    partitions = sum(len(t.partitions) for t in topics.values())
    scrape = wait_until(lambda: _settled(shared_broker, partitions), 10, "partition counts that match Metadata")
    assert scrape.value("kafka_server_replicamanager_leadercount") == partitions
    assert scrape.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert scrape.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert scrape.value("kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert scrape.value("kafka_controller_kafkacontroller_globalpartitioncount") == partitions
    assert scrape.value("kafka_controller_kafkacontroller_activebrokercount") == 1
    assert scrape.value("kafka_server_raft_metrics_current_leader") == 1
    assert scrape.value("kafka_server_raft_metrics_current_epoch") >= 1
    assert scrape.value("kafka_server_raft_metrics_high_watermark") > 0
    # Creating the topic went through the quorum: its commit took a measurable time, at most the maximum.
    assert 0 <= scrape.value("kafka_server_raft_metrics_commit_latency_avg") \
        <= scrape.value("kafka_server_raft_metrics_commit_latency_max")
    assert scrape.value("kafka_network_requestchannel_requestqueuesize") >= 0
    with RawClient(shared_broker.bootstrap) as client:
        client.request(ApiVersionsRequest(client_software_name="metrics-test", client_software_version="1"))
        connected = Scrape(shared_broker.metrics_url)
        assert connected.value("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 1
    assert scrape.value("kafka_server_replicamanager_isrshrinks_total") == 0
    assert scrape.get("process_resident_memory_bytes") is not None  # prometheus-client's standard collectors
    assert scrape.content_type.startswith("text/plain; version=0.0.4")


# A window far longer than a round trip (about 0.3 ms on a quiet machine, 0.7 ms seen on a slow one), so that
# polling starts whatever the machine.
@pytest.mark.broker_config({"network.idle.poll.us": "20000"})
def test_idle_polling_is_counted_while_requests_come_close(broker: BrokerProcess) -> None:
    def polled() -> float:
        return Scrape(broker.metrics_url).value("moldau_network_idle_poll_seconds_total")

    before = polled()
    with RawClient(broker.bootstrap) as client:
        for _ in range(300):  # synchronous round trips, well under the window apart
            client.request(ApiVersionsRequest(client_software_name="metrics-test", client_software_version="1"))
    assert polled() > before


def _settled(broker: BrokerProcess, partitions: int) -> Scrape | None:
    scrape = Scrape(broker.metrics_url)
    return scrape if scrape.value("kafka_server_replicamanager_partitioncount") == partitions else None


def test_openmetrics_on_request_and_404_elsewhere(shared_broker: BrokerProcess) -> None:
    request = urllib.request.Request(shared_broker.metrics_url,
                                     headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        assert response.read().decode().rstrip().endswith("# EOF")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(shared_broker.metrics_url.replace("/metrics", "/nothing"), timeout=10)
    assert missing.value.code == 404


def test_a_console_port_in_use_stops_the_broker_at_startup(shared_broker: BrokerProcess, tmp_path: Path) -> None:
    taken = shared_broker.overrides["console.listeners"]
    proc = BrokerProcess(tmp_path, {"console.listeners": taken})
    command = [sys.executable, "-m", "moldau", "server"]
    for key, value in proc.overrides.items():
        command += ["--override", f"{key}={value}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "console.listeners" in result.stdout + result.stderr


def test_quota_throttle_time_per_client(shared_broker: BrokerProcess, topic: str) -> None:
    bootstrap = shared_broker.bootstrap
    entity = ["--entity-type", "clients", "--entity-name", "metrics-throttled"]
    ok(bootstrap, "quotas", "alter", *entity, "--add-config", "producer_byte_rate=20000")
    try:
        produce_for(bootstrap, topic, "metrics-throttled", 1.5, [])
        produce_for(bootstrap, topic, "metrics-free", 0.3, [])
        scrape = Scrape(shared_broker.metrics_url)
        throttled = scrape.labelled("kafka_server_quota_throttle_time", resource="Produce",
                                    clientId="metrics-throttled")
        free = scrape.labelled("kafka_server_quota_throttle_time", resource="Produce", clientId="metrics-free")
        assert len(throttled) == 1 and next(iter(throttled.values())) > 0, throttled
        assert list(free.values()) == [0], free
    finally:
        ok(bootstrap, "quotas", "alter", *entity, "--delete-config", "producer_byte_rate")


def test_a_long_polling_fetch_is_in_the_request_queue(shared_broker: BrokerProcess, topic: str) -> None:
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": "unused-assign-only",
                         "fetch.wait.max.ms": 3000, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        consumer.poll(0.5)  # connected; its next Fetch waits at the end of the partition

        def waiting() -> Scrape | None:
            consumer.poll(0.1)
            scrape = Scrape(shared_broker.metrics_url)
            return scrape if scrape.value("kafka_network_requestchannel_requestqueuesize") >= 1 else None

        wait_until(waiting, 10, "a Fetch waiting in the request queue")
    finally:
        consumer.close()
