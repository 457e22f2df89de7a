"""A dynamic controller quorum on real processes (KIP-853): a controller joins through
`controller.quorum.bootstrap.servers`, `moldau quorum add-controller` makes it a voter, `remove-controller` takes
another voter out, and from then on the removed node does not count toward the majority.

Timeouts are shortened as in test_quorum_cluster.py so the scenario runs in well under a minute.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.cli.cluster import Node
from moldau.net.ports import free_ports
from tests.support.cli_runner import moldau, ok
from tests.support.cluster import ClusterNode, LocalCluster, QuorumInfo, _describe_quorum_request
from tests.support.raw_client import RawClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

FAST = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "2500",
}


def create_topic(address: str, name: str) -> None:
    """Create a topic: it returns once the metadata quorum committed it."""
    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10)[name].result(timeout=20)


def voters(cluster: LocalCluster) -> set[int]:
    found = cluster.agreed_leader()
    return set() if found is None else {v.replica_id for v in found.voters}


def leader_with_voters(cluster: LocalCluster, wanted: set[int]) -> QuorumInfo | None:
    found = cluster.agreed_leader()
    return found if found is not None and {v.replica_id for v in found.voters} == wanted else None


def joining_controller(cluster: LocalCluster, base: Path) -> ClusterNode:
    """Node 4: controller only, finding the quorum through its bootstrap servers, not in any voter list."""
    spec = Node(4, ("controller",), None, free_ports(1)[0])
    overrides = {**FAST, "controller.quorum.voters": "",
                 "controller.quorum.bootstrap.servers": cluster.bootstrap_controllers}
    return ClusterNode(spec, cluster.layout, base, overrides)


def properties_file(node: ClusterNode, path: Path) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in node.overrides.items()))
    return path


def test_a_controller_joins_the_quorum_and_a_voter_leaves(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, 3, overrides=FAST) as cluster:
        cluster.active_controller()
        broker = cluster.node(1).kafka_address
        assert broker is not None
        refused = moldau(broker, "quorum", "remove-controller", "--controller-id", "3")
        assert refused.returncode != 0 and "UNSUPPORTED_VERSION" in refused.stderr  # static: kraft.version 0
        upgraded = moldau(broker, "features", "upgrade", "--feature", "kraft.version=1")
        if "NOT_CONTROLLER" in upgraded.stderr:  # leadership moved on a loaded machine: retry, as Kafka's tools do
            ok(broker, "features", "upgrade", "--feature", "kraft.version=1")
        else:
            assert upgraded.returncode == 0, upgraded.stderr
        assert "kraft.version" in ok(broker, "features", "describe")
        # The upgrade records only the leader's directory id; the other voters send theirs (UpdateRaftVoter).
        cluster.wait_until(lambda: directory_ids(cluster) if len(directory_ids(cluster)) == 3 else None, 20,
                           "every voter's directory id in the voter set")

        node4 = joining_controller(cluster, tmp_path)
        cluster.nodes[4] = node4  # stopped with the others
        node4.start()
        cluster.wait_until(lambda: 4 in {o.replica_id for o in (cluster.agreed_leader() or _none()).observers},
                           20, "node 4 fetching as an observer")
        props = properties_file(node4, tmp_path / "node-4.properties")
        added = ok(broker, "quorum", "add-controller", "--command-config", str(props))
        assert "Added controller 4" in added
        cluster.wait_until(lambda: leader_with_voters(cluster, {1, 2, 3, 4}), 20, "node 4 among the voters")
        status = ok(broker, "quorum", "describe", "--status")
        assert '"id": 4' in status and "directoryId" in status
        create_topic(broker, "after-add")  # the four-voter quorum commits

        ok(broker, "quorum", "remove-controller", "--controller-id", "3")
        cluster.wait_until(lambda: leader_with_voters(cluster, {1, 2, 4}), 20, "node 3 out of the voters")
        node3 = cluster.node(3).controller_address  # not the leader: the command finds the leader through it
        assert node3 is not None
        replication = ok(broker, "quorum", "describe", "--replication", "--bootstrap-controller", node3)
        rows = {line.split()[0]: line.split()[-1] for line in replication.splitlines()[1:] if line.strip()}
        assert rows.get("3") == "Observer" and rows.get("4") in ("Leader", "Follower"), replication

        # With 2 and 3 gone, 1 and 4 are two of the three voters: a majority only because 3 no longer counts
        # (of the four voters before, two would not be enough).
        cluster.node(3).kill()
        cluster.node(2).kill()
        cluster.wait_until(lambda: leader_with_voters(cluster, {1, 2, 4}), 20, "a leader among 1 and 4")
        create_topic(broker, "after-remove")


def directory_ids(cluster: LocalCluster) -> dict[int, uuid.UUID]:
    """The voters' directory ids in the leader's DescribeQuorum v2 answer (those it knows)."""
    found = cluster.agreed_leader()
    if found is None:
        return {}
    address = cluster.node(found.leader_id).controller_address
    assert address is not None
    with RawClient(address) as client:
        answer = client.request(_describe_quorum_request(2))
    voters = answer.topics[0].partitions[0].current_voters
    return {int(v.replica_id): v.replica_directory_id for v in voters
            if v.replica_directory_id is not None and v.replica_directory_id.int}


def _none() -> QuorumInfo:
    return QuorumInfo(-1, -1, -1, -1, (), ())
