"""The streaming sink's driver step (`moldau.spark.publish`) against a real broker, without Spark: the
transactional producer kept between micro-batches, and what happens when another driver fences it."""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import IsolationLevel, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from moldau.spark import commits, produce, publish, staging
from moldau.spark.fetch import FetchSettings, read_range
from moldau.spark.offsets import OffsetRange
from moldau.spark.options import SinkOptions
from moldau.spark.produce import producer_conf, send_all
from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic

pytestmark = pytest.mark.spark

LATEST: Any = OffsetSpec.latest  # untyped in the client library


@pytest.fixture
def options(shared_broker: BrokerProcess) -> Iterator[SinkOptions]:
    run = uuid.uuid4().hex[:8]
    opts = SinkOptions(bootstrap=shared_broker.bootstrap, topic=f"publish-out-{run}",
                       commits_topic=f"publish-commits-{run}", staging_topic=f"publish-staging-{run}",
                       client_conf={})
    create_topic(opts.bootstrap, f"publish-out-{run}")
    commits.ensure_topic(opts.bootstrap, {}, opts.commits_topic)
    staging.ensure_topic(opts.bootstrap, {}, opts.staging_topic)
    yield opts
    produce._IDLE_PRODUCERS.clear()  # no kept producer leaks into another test


def stage(options: SinkOptions, values: list[bytes]) -> staging.StagedRange:
    """Stage `values` for the output topic as one task attempt would."""
    tag = staging.new_tag()
    acked = staging.Acknowledged()
    rows = (staging.staged_row({"topic": options.topic, "key": None, "value": value}, options.staging_topic, 0, tag)
            for value in values)
    count = send_all(Producer(producer_conf(options)), rows, acked.saw)
    assert acked.low is not None and acked.high is not None
    return staging.StagedRange(options.staging_topic, 0, acked.low, acked.high + 1, tag, count)


def output(options: SinkOptions, isolation: str = "read_committed") -> list[bytes]:
    """The values of the (one-partition) output topic up to its end at `isolation`."""
    assert options.topic is not None
    admin = AdminClient({"bootstrap.servers": options.bootstrap})
    level = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
    partition = CkTopicPartition(options.topic, 0)
    end = admin.list_offsets({partition: LATEST()}, isolation_level=level)[partition].result().offset
    settings = FetchSettings(bootstrap=options.bootstrap, client_conf={}, isolation_level=isolation,
                             include_headers=False, fail_on_data_loss=True, poll_timeout_ms=30_000)
    return [value for batch in read_range(settings, OffsetRange(options.topic, 0, 0, end))
            for value in batch.column("value").to_pylist()]


def test_kept_producer_publishes_the_next_batch_without_a_new_init(options: SinkOptions) -> None:
    assert publish.publish_batch(options, "query-a", 0, [stage(options, [b"a0", b"a1"])])
    kept = list(produce._IDLE_PRODUCERS.values())
    assert len(kept) == 1
    assert publish.publish_batch(options, "query-a", 1, [stage(options, [b"b0"])])
    assert list(produce._IDLE_PRODUCERS.values()) == kept, "the producer of batch 0 did not publish batch 1"
    # A replay of a committed batch writes nothing and keeps the producer.
    assert not publish.publish_batch(options, "query-a", 1, [stage(options, [b"b0"])])
    assert list(produce._IDLE_PRODUCERS.values()) == kept
    assert output(options) == [b"a0", b"a1", b"b0"]
    assert commits.last_committed(options.bootstrap, {}, options.commits_topic, "query-a") == 1


def test_fenced_kept_producer_is_replaced_and_the_batch_still_published(options: SinkOptions) -> None:
    assert publish.publish_batch(options, "query-b", 0, [stage(options, [b"a0"])])
    (fenced,) = produce._IDLE_PRODUCERS.values()
    # Another driver of the same query (a restart elsewhere) takes over the transactional id.
    usurper = Producer({**producer_conf(options), "transactional.id": publish.transactional_id("query-b")})
    usurper.init_transactions(30)

    assert publish.publish_batch(options, "query-b", 1, [stage(options, [b"b0", b"b1"])])
    (replacement,) = produce._IDLE_PRODUCERS.values()
    assert replacement is not fenced
    assert output(options) == [b"a0", b"b0", b"b1"]
    # The fenced producer wrote nothing, not even records a read_uncommitted reader would see.
    assert output(options, "read_uncommitted") == [b"a0", b"b0", b"b1"]
    assert commits.last_committed(options.bootstrap, {}, options.commits_topic, "query-b") == 1
    # Nothing keeps the fenced producer (and its connections) alive: not the fencing error, nor its log record.
    fenced_id = id(fenced)
    del fenced
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, Producer) and id(o) == fenced_id]
