"""Client quotas in a three-node cluster: altered through a broker that is not the active controller (the
request is forwarded), replicated to every node through the metadata log, and kept across a node's restart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
FAST = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "2500",
}


def quotas(address: str, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "moldau", "quotas", *args, "-b", address], capture_output=True,
                            text=True, cwd=REPO, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_quotas_are_forwarded_replicated_and_survive_a_restart(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, 3, overrides=FAST) as cluster:
        active = cluster.active_controller().leader_id
        other = next(n for n in cluster.brokers if n.node_id != active)
        assert other.kafka_address is not None
        quotas(other.kafka_address, "alter", "--entity-type", "clients", "--entity-name", "app",
               "--add-config", "producer_byte_rate=1048576")
        expected = "client=app  producer_byte_rate  1048576"
        for node in cluster.brokers:
            address = node.kafka_address
            assert address is not None
            cluster.wait_until(lambda address=address: expected in quotas(address, "describe"), 30,
                               f"node {node.node_id} to see the quota")
        other.restart()
        assert other.kafka_address is not None
        cluster.wait_until(lambda: expected in quotas(other.kafka_address or "", "describe"), 30,
                           "the restarted node to see the quota")
