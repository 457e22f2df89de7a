"""The figures of the cluster and topic pages, shaped from what the cluster answers (librdkafka's metadata objects
are stood in for by plain records of the same shape; the pages themselves are tested in tests/console)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from moldau.console.cluster_view import QuorumView, active_controller, broker_details, quorum_view
from moldau.console.errors import ConsoleError
from moldau.console.native import LogDir, QuorumReplica, QuorumState, bootstrap_address
from moldau.console.topic_view import CreateTopicForm, parse_configs, partition_rows, replica_sizes, topic_rows


def _partition(pid: int, leader: int, replicas: list[int], isr: list[int]) -> SimpleNamespace:
    return SimpleNamespace(id=pid, leader=leader, replicas=replicas, isrs=isr)


def _metadata() -> SimpleNamespace:
    orders = SimpleNamespace(topic="orders", error=None, partitions={
        0: _partition(0, 1, [1, 2], [1, 2]), 1: _partition(1, 2, [2, 3], [2])})
    offsets = SimpleNamespace(topic="__consumer_offsets", error=None, partitions={0: _partition(0, 3, [3], [3])})
    return SimpleNamespace(topics={"orders": orders, "__consumer_offsets": offsets})


def test_quorum_lag_is_measured_from_the_leaders_log_end() -> None:
    state = QuorumState(leader_id=2, leader_epoch=7, high_watermark=95, voters=(
        QuorumReplica(1, 90, 9_000, 8_000), QuorumReplica(2, 100, -1, -1), QuorumReplica(3, 100, 9_500, 9_500)),
        observers=(QuorumReplica(4, 60, 5_000, -1),))
    view = quorum_view(state, now_ms=10_000)
    assert [(r.node_id, r.role, r.lag) for r in view.rows] == [
        (2, "leader", 0), (1, "voter", 10), (3, "voter", 0), (4, "observer", 40)]
    assert (view.rows[1].last_fetch_ago_ms, view.rows[1].last_caught_up_ago_ms) == (1_000, 2_000)
    assert view.rows[0].last_fetch_ago_ms is None and view.rows[3].last_caught_up_ago_ms is None


def test_topic_rows_sum_replicas_and_offsets_and_mark_under_replication() -> None:
    sizes = replica_sizes({
        1: [LogDir("/a", None, -1, -1, {("orders", 0): 100})],
        2: [LogDir("/b", None, -1, -1, {("orders", 0): 100, ("orders", 1): 40})],
        3: "CLUSTER_AUTHORIZATION_FAILED: no",  # a broker that would not say is left out
    })
    offsets = {("orders", 0): (5, 15), ("orders", 1): (0, 7)}
    [row] = topic_rows(_metadata(), sizes, offsets)
    assert (row.name, row.partitions, row.replication_factor) == ("orders", 2, 2)
    assert (row.size_bytes, row.messages, row.under_replicated) == (240, 17, 1)

    shown = topic_rows(_metadata(), None, {}, show_internal=True, name_filter="CONSUMER")
    assert [(r.name, r.internal, r.size_bytes, r.messages) for r in shown] == [
        ("__consumer_offsets", True, None, None)]


def test_partition_rows_show_the_leaders_replica_size() -> None:
    sizes = {("orders", 0): {1: 100, 2: 90}, ("orders", 1): {2: 40}}
    rows = partition_rows(_metadata().topics["orders"], sizes, {("orders", 0): (5, 15)})
    assert [(r.partition, r.size_bytes, r.messages, r.under_replicated) for r in rows] == [
        (0, 100, 10, False), (1, 40, None, True)]


def test_broker_details_count_leaders_and_replicas() -> None:
    cluster = SimpleNamespace(controller=SimpleNamespace(id=3), nodes=[
        SimpleNamespace(id=n, host="h", port=9000 + n, rack="r1" if n == 1 else None) for n in (3, 1, 2)])
    log_dir = LogDir("/a", None, 1000, 500, {("orders", 0): 100, ("orders", 1): 20})
    details = broker_details(cluster, _metadata(), {1: [log_dir], 2: "timed out"})
    assert [(b.node_id, b.rack, b.is_controller, b.leaders, b.replicas) for b in details] == [
        (1, "r1", False, 1, 1), (2, None, False, 1, 2), (3, None, True, 1, 2)]
    assert details[0].size_bytes == 120 and details[1].log_dirs_error == "timed out"


def test_the_create_form_is_checked_before_the_broker_sees_it() -> None:
    topic = CreateTopicForm("t", "3", "", "a=1\n\n# note\n b = 2 ").parse()
    assert (topic.topic, topic.num_partitions, topic.replication_factor, topic.config) == (
        "t", 3, -1, {"a": "1", "b": "2"})
    for form, message in ((CreateTopicForm(""), "needs a name"), (CreateTopicForm("t", "0"), "at least 1"),
                          (CreateTopicForm("t", "1", "x"), "Replication factor")):
        with pytest.raises(ConsoleError, match=message) as raised:
            form.parse()
        assert raised.value.status == 400
    with pytest.raises(ConsoleError, match="line 2"):
        parse_configs("a=1\nno-equals")


def test_bootstrap_address_takes_the_first_server() -> None:
    assert bootstrap_address({"bootstrap.servers": "SASL_SSL://[::1]:9093, b:9094"}) == ("::1", 9093)


def test_the_active_controller_is_the_quorum_leader_when_it_is_known() -> None:
    # With controller-only nodes, Metadata and DescribeCluster name a broker as the controller.
    assert active_controller(QuorumView(1, 3, 40, []), cluster_controller_id=2) == 1
    assert active_controller(QuorumView(-1, -1, -1, [], error="timed out"), cluster_controller_id=2) == 2
