"""`moldau mirror` with `exactly.once.source.support = enabled` (KIP-618 in MirrorMaker 2's dedicated mode): the
mirror process is killed with SIGKILL under a steady load on the source and started again; a read_committed
consumer of the target then reads, partition by partition, exactly the source's records in the source's order:
nothing lost and nothing copied twice."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.test_mirror_driver import Mirror, mm2_properties
from tests.support.broker_process import BrokerProcess
from tests.support.connect_worker import wait_for
from tests.support.mirror import PARTITIONS, Load, fresh_topic
from tests.support.transactions import READ_UNCOMMITTED, committed_records, read_to_end

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def east(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("eos-east"))
    broker.start()
    yield broker
    try:
        broker.stop()
    finally:
        broker.cleanup()


def by_partition(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[int, list[tuple[bytes | None,
                                                                                             bytes | None]]]:
    out: dict[int, list[tuple[bytes | None, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
    for partition, key, value in records:
        out[partition].append((key, value))
    return out


def test_the_mirror_killed_under_load_copies_every_record_exactly_once(east: BrokerProcess,
                                                                      shared_broker: BrokerProcess,
                                                                      tmp_path: Path) -> None:
    topic = fresh_topic(east.bootstrap)
    config = mm2_properties(tmp_path / "mm2.properties", east, shared_broker, topic)
    with open(config, "a") as file:
        file.write("exactly.once.source.support = enabled\n")
    mirror = Mirror(config, tmp_path / "mirror.log")
    remote = f"east.{topic}"

    def on_target() -> list[tuple[int, bytes | None, bytes | None]]:
        return [(r.partition, r.key, r.value) for r in committed_records(shared_broker.bootstrap, remote, PARTITIONS)]

    mirror.start()
    with mirror.watched():
        with Load(east.bootstrap, topic) as load:
            wait_for(lambda: len(on_target()) > 300, 90, "the mirror to copy")
            mirror.signal(signal.SIGKILL)
            wait_for(lambda: len(load.acked) > len(on_target()) + 200, 30, "records written while the mirror is down")
            mirror.start()
        source = [(r.partition, r.key, r.value) for r in read_to_end(east.bootstrap, topic, READ_UNCOMMITTED)]
        assert len(source) == len(load.acked)
        wait_for(lambda: len(on_target()) >= len(source), 120, "the restarted mirror to catch up")
        # Record by record, in each partition's order: nothing lost, nothing twice.
        assert by_partition(on_target()) == by_partition(source)
        mirror.signal(signal.SIGTERM)
