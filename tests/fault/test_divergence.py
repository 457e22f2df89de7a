"""A leader cut off from the cluster keeps accepting acks=1 writes that no follower has; a new leader is elected
and takes acks=all writes. When the link heals, the old leader comes back as a follower and must cut exactly the
suffix it alone wrote (leader epochs, KIP-101/KIP-279): afterwards every replica's log is the same, holds every
acks=all record, and none of the records that were never replicated.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.support.cluster import metadata_at
from tests.support.fault_cluster import FaultCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "diverge"


def produce(address: str, values: list[str], acks: str) -> dict[str, int]:
    """Send to one partition through the broker at `address` only; value -> offset of what was acknowledged."""
    producer = Producer({"bootstrap.servers": address, "acks": acks, "retries": 0, "linger.ms": 0,
                         "message.timeout.ms": 5000, "enable.idempotence": False})
    acked: dict[str, int] = {}

    def done(err: object, msg: object) -> None:
        if err is None:
            acked[msg.value().decode()] = msg.offset()  # type: ignore[attr-defined]

    for value in values:
        producer.produce(TOPIC, value=value.encode(), partition=0, on_delivery=done)
    producer.flush(15)
    return acked


def leader_seen_by(cluster: FaultCluster, node_ids: list[int]) -> int | None:
    """The partition's leader if it is one of `node_ids`, as the first of them answers; None otherwise."""
    try:
        meta = metadata_at(str(cluster.node(node_ids[0]).kafka_address), [TOPIC])
    except Exception:
        return None
    leader = int(meta.topics[0].partitions[0].leader_id)
    return leader if leader in node_ids else None


def replica_logs(cluster: FaultCluster) -> dict[int, bytes]:
    """Each node's bytes of partition 0 (all segments in order)."""
    logs = {}
    for node_id, node in cluster.nodes.items():
        directory = Path(node.data_dir) / f"{TOPIC}-0"
        logs[node_id] = b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
    return logs


def test_a_returning_leader_truncates_exactly_its_unreplicated_suffix(tmp_path: Path) -> None:
    with FaultCluster(tmp_path, nodes=3) as cluster:
        cluster.wait_stable(60)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        cluster.wait_stable(30, TOPIC)
        old_leader = cluster.partition_leaders(TOPIC)[0]
        old_address = str(cluster.node(old_leader).kafka_address)
        committed = produce(old_address, [f"before-{i}" for i in range(20)], acks="all")
        assert len(committed) == 20

        cut = cluster.mesh.isolate(old_leader)
        stray = produce(old_address, [f"stray-{i}" for i in range(10)], acks="1")
        assert stray, "the cut-off leader still took acks=1 writes (it does not know yet)"
        others = cluster.others(old_leader)
        new_leader = cluster.wait_until(lambda: leader_seen_by(cluster, others), 30, "a new leader among the others")
        after = produce(str(cluster.node(new_leader).kafka_address), [f"after-{i}" for i in range(20)], acks="all")
        assert len(after) == 20

        cluster.mesh.heal(cut)
        cluster.wait_until(lambda: len(set(replica_logs(cluster).values())) == 1, 60,
                           "every replica's log to be identical")
    log = replica_logs(cluster)[old_leader]
    for value in [*committed, *after]:
        assert value.encode() in log, f"{value} (acknowledged with acks=all) is missing"
    for value in stray:
        assert value.encode() not in log, f"{value} (never replicated) survived the old leader's return"
