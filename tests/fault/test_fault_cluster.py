"""The fault cluster's wiring: every node-to-node link goes through the proxy mesh, clients connect directly,
and cutting links partitions the metadata quorum the way a network failure would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from moldau.config import BrokerConfig
from tests.support.cluster import QuorumInfo
from tests.support.fault_cluster import (
    CONTROLLER_SERVICE,
    INTER_BROKER_LISTENER_CONFIG,
    REPLICATION_SERVICE,
    FaultCluster,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FaultCluster]:
    with FaultCluster(tmp_path, nodes=3) as started:
        yield started


def test_every_node_link_is_proxied_and_the_configs_are_valid(tmp_path: Path) -> None:
    cluster = FaultCluster(tmp_path, nodes=3, inter_broker_listener=True)
    try:
        assert len(cluster.mesh.proxies) == 3 * 2 * 2
        for node in cluster.nodes.values():
            config = node.overrides
            BrokerConfig.from_properties(config)  # the broker accepts it (unknown configs only warn)
            assert config[INTER_BROKER_LISTENER_CONFIG] == f"FROM{node.node_id}"
            voters = dict(v.split("@") for v in config["controller.quorum.voters"].split(","))
            assert voters[str(node.node_id)] == node.controller_address
            for other in cluster.others(node.node_id):
                assert voters[str(other)] == cluster.mesh.address(node.node_id, other, CONTROLLER_SERVICE)
                assert f"FROM{other}://{cluster.mesh.address(other, node.node_id, REPLICATION_SERVICE)}" in \
                    config["advertised.listeners"]
            assert f"CLIENT://{node.kafka_address}" in config["advertised.listeners"]
            assert config["listeners"].startswith(f"FROM{node.node_id}://")
    finally:
        cluster.close()


def test_clients_see_client_endpoints(cluster: FaultCluster) -> None:
    cluster.active_controller(30)
    answer = cluster.wait_until(lambda: _all_brokers(cluster), 20, "all brokers in Metadata")
    assert {(b.node_id, f"{b.host}:{b.port}") for b in answer.brokers} == \
        {(n.node_id, n.kafka_address) for n in cluster.nodes.values()}


def _all_brokers(cluster: FaultCluster) -> Any:
    answer = cluster.metadata()
    return answer if len(answer.brokers) == len(cluster.nodes) else None


def test_isolating_the_active_controller_elects_another_and_healing_lets_it_rejoin(cluster: FaultCluster) -> None:
    old = cluster.active_controller(30).leader_id
    majority = cluster.others(old)
    cut = cluster.mesh.isolate(old)
    new = cluster.wait_until(lambda: _led_by_other(cluster, majority, old), 30, f"a controller other than {old}")
    assert new.leader_id in majority

    cluster.mesh.heal(cut)
    rejoined = cluster.wait_until(lambda: cluster.agreed_leader_among(cluster.ids), 30, "all three to agree")
    assert rejoined.leader_epoch >= new.leader_epoch
    assert {v.replica_id for v in rejoined.voters} == set(cluster.ids)


def _led_by_other(cluster: FaultCluster, nodes: list[int], old: int) -> QuorumInfo | None:
    found = cluster.agreed_leader_among(nodes)
    return found if found is not None and found.leader_id != old else None


def test_a_minority_alone_elects_nobody(cluster: FaultCluster) -> None:
    old = cluster.active_controller(30).leader_id
    follower = cluster.others(old)[0]
    cut = cluster.mesh.isolate(follower)
    try:
        # The isolated follower cannot win an election alone; the majority keeps its leader.
        cluster.wait_until(lambda: _led_by_other(cluster, [follower], -1) is None and
                           cluster.agreed_leader_among(cluster.others(follower)), 10, "the majority to keep a leader")
        assert cluster.agreed_leader_among([follower]) is None
    finally:
        cluster.mesh.heal(cut)
    cluster.wait_until(lambda: cluster.agreed_leader_among(cluster.ids), 30, "all three to agree")
