"""`metadata.log.dir`: the metadata log in a directory of its own, as Kafka places it, and a metadata log left
behind in another directory refused at start instead of silently replaced by an empty one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, ck_produce, create_topic

METADATA = "__cluster_metadata"


def props(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and line[0] != "#")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path, {"log.dirs": f"{tmp_path / 'disk-a'},{tmp_path / 'disk-b'}"})
    try:
        yield process
        if process.running:
            assert process.stop() == 0, process.log_tail()
        assert "Traceback" not in process.log_path.read_text(errors="replace")
    finally:
        process.cleanup()


def test_the_metadata_log_lives_in_metadata_log_dir_and_the_first_log_dir_is_no_longer_vital(
        broker: BrokerProcess, tmp_path: Path) -> None:
    disk_a, disk_b, meta = tmp_path / "disk-a", tmp_path / "disk-b", tmp_path / "meta"
    broker.overrides["metadata.log.dir"] = str(meta)
    broker.start()
    create_topic(broker.bootstrap, "kept", partitions=4)
    for partition in range(4):
        ck_produce(broker.bootstrap, "kept", [{"value": b"r%d" % i, "partition": partition} for i in range(5)])
    assert (meta / METADATA).is_dir()
    assert not (disk_a / METADATA).exists() and not (disk_b / METADATA).exists()
    assert props(meta / "meta.properties")["cluster.id"] == props(disk_a / "meta.properties")["cluster.id"]
    assert "directory.id" not in props(meta / "meta.properties"), "it holds no partitions"

    assert broker.stop() == 0
    on_b = sorted(int(p.name.rsplit("-", 1)[1]) for p in disk_b.iterdir() if p.name.startswith("kept-"))
    disk_a.rename(tmp_path / "disk-a-unplugged")
    disk_a.write_text("the disk is gone")
    broker.start()  # the first log dir is unusable: it starts offline, the metadata log is elsewhere
    assert on_b, "the topic's partitions were spread over both directories"
    for partition in on_b:
        assert len(ck_consume(broker.bootstrap, "kept", 5, partitions=[partition])) == 5


def test_a_metadata_log_left_in_another_directory_stops_the_start_until_moved(
        broker: BrokerProcess, tmp_path: Path) -> None:
    disk_a, meta = tmp_path / "disk-a", tmp_path / "meta"
    broker.start()
    create_topic(broker.bootstrap, "survivor")
    ck_produce(broker.bootstrap, "survivor", [{"value": b"r%d" % i} for i in range(7)])
    assert broker.stop() == 0
    assert (disk_a / METADATA).is_dir()

    broker.overrides["metadata.log.dir"] = str(meta)
    with pytest.raises(RuntimeError, match=r"disk-a/__cluster_metadata holds this node's metadata log"):
        broker.start()
    assert (disk_a / "survivor-0").is_dir(), "nothing was deleted"

    meta.mkdir(exist_ok=True)
    (disk_a / METADATA).rename(meta / METADATA)
    broker.start()
    assert [r.value for r in ck_consume(broker.bootstrap, "survivor", 7)] == [b"r%d" % i for i in range(7)]
