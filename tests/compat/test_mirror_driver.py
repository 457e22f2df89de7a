"""`moldau mirror MM2.properties`, MirrorMaker 2's dedicated mode, as a real process between two real brokers:
it runs the flow's connectors on a distributed worker of its own, copies a topic under load, and after a
kill -9 and a restart goes on with nothing lost (at least once: the duplicates are counted and reported);
`moldau mirror status` then shows every partition caught up and a group's checkpoints."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.broker_process import BrokerProcess, signal_and_wait
from tests.support.connect_worker import wait_for
from tests.support.mirror import PARTITIONS, Load, copied, fresh_topic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def east(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("driver-east"))
    broker.start()
    yield broker
    try:
        broker.stop()
    finally:
        broker.cleanup()


def mm2_properties(path: Path, east: BrokerProcess, west: BrokerProcess, topic: str) -> Path:
    lines = {
        "clusters": "east, west", "east.bootstrap.servers": east.bootstrap, "west.bootstrap.servers": west.bootstrap,
        "east->west.enabled": "true", "east->west.topics": topic, "east->west.offset.flush.interval.ms": "500",
        "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1", "heartbeats.topic.replication.factor": "1",
        "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1", "emit.checkpoints.interval.seconds": "1",
        "refresh.groups.interval.seconds": "1",
        # Unique internal topics and groups per test run on the shared target broker.
        "offset.storage.topic": f"mm2-offsets-{topic}.internal",
        "config.storage.topic": f"mm2-configs-{topic}.internal",
        "status.storage.topic": f"mm2-status-{topic}.internal", "east->west.group.id": f"east-mm2-{topic}",
        "west->east.group.id": f"west-mm2-{topic}",
    }
    path.write_text("".join(f"{k} = {v}\n" for k, v in lines.items()))
    return path


class Mirror:
    def __init__(self, config: Path, log: Path) -> None:
        self.config, self.log = config, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "moldau", "mirror", str(self.config)], stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def signal(self, sig: int) -> None:
        if self.proc is not None:
            signal_and_wait(self.proc, sig, 60, "mirror")
            self.proc = None

    @contextlib.contextmanager
    def watched(self) -> Iterator[None]:
        """Show the end of the mirror's log when the block fails, and kill whatever is left of it at the end."""
        try:
            yield
        except BaseException:
            print(self.log.read_text(errors="replace")[-4000:])
            raise
        finally:
            self.signal(signal.SIGKILL)


def test_the_dedicated_mirror_copies_and_survives_kill_9(east: BrokerProcess, shared_broker: BrokerProcess,
                                                         tmp_path: Path) -> None:
    topic = fresh_topic(east.bootstrap)
    mirror = Mirror(mm2_properties(tmp_path / "mm2.properties", east, shared_broker, topic), tmp_path / "mirror.log")
    mirror.start()
    remote = f"east.{topic}"
    with mirror.watched():
        with Load(east.bootstrap, topic) as load:
            wait_for(lambda: len(copied(shared_broker.bootstrap, remote)) > 300, 90, "the mirror to copy")
            mirror.signal(signal.SIGKILL)
            wait_for(lambda: len(load.acked) > len(copied(shared_broker.bootstrap, remote)) + 200, 30,
                     "records written while the mirror is down")
            mirror.start()
        wait_for(lambda: set(copied(shared_broker.bootstrap, remote)) >= load.acked, 120,
                 "the restarted mirror to catch up")
        values = copied(shared_broker.bootstrap, remote)
        duplicates = len(values) - len(set(values))
        print(f"mirror kill -9: {len(load.acked)} records, {duplicates} copied twice, none lost")

        # `moldau mirror status`: every partition caught up (as of the last offset commit), and the group a
        # consumer committed on the source shows up checkpointed.
        group = f"status-{topic}"
        consumer = Consumer({"bootstrap.servers": east.bootstrap, "group.id": group, "enable.auto.commit": False})
        # At the end of each partition: a checkpoint task that starts after the syncs were written translates
        # from the newest one on (MirrorMaker 2's rule; see docs/mirror.md).
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)]
        consumer.commit(offsets=[TopicPartition(topic, p, ends[p]) for p in range(PARTITIONS)], asynchronous=False)
        consumer.close()

        def status() -> str:
            result = subprocess.run([sys.executable, "-m", "moldau", "mirror", "status", str(mirror.config)],
                                    capture_output=True, text=True, timeout=120, check=False)
            assert result.returncode == 0, result.stderr
            return result.stdout

        caught_up = [f"  {topic}\t{p}\t" for p in range(PARTITIONS)]
        outputs = [""]

        def shows_it() -> bool:
            out = outputs[0] = status()
            return all(any(line.startswith(prefix) and line.endswith("\t0\t0.0") for line in out.splitlines())
                       for prefix in caught_up) and f"  {group}\t{remote}\t" in out
        try:
            wait_for(shows_it, 60, "status to show it")
        except AssertionError:
            raise AssertionError(outputs[0]) from None
        shown = outputs[0]
        assert "flow east->west" in shown
        mirror.signal(signal.SIGTERM)


def test_the_dedicated_mirror_serves_its_rest_api_over_https(east: BrokerProcess, shared_broker: BrokerProcess,
                                                            tmp_path: Path) -> None:
    """A flow's worker on an https listener that requires client certificates (`east->west.listeners` and
    `east->west.listeners.https.ssl.*`, Connect's names): the mirror creates its connectors through it with the
    worker's own certificate and copies the topic; a client without a certificate is refused."""
    import ssl
    import urllib.error
    import urllib.request

    from confluent_kafka import Producer

    from moldau.net.ports import free_port
    from tests.support.tls import make_pki

    pki = make_pki(tmp_path / "pki")
    topic, port = fresh_topic(east.bootstrap), free_port()
    config = mm2_properties(tmp_path / "mm2.properties", east, shared_broker, topic)
    prefix = "east->west.listeners.https."
    https = {"east->west.listeners": f"https://127.0.0.1:{port}", f"{prefix}ssl.keystore.type": "PEM",
             f"{prefix}ssl.keystore.location": str(pki.server), f"{prefix}ssl.truststore.type": "PEM",
             f"{prefix}ssl.truststore.location": str(pki.ca), f"{prefix}ssl.client.auth": "required"}
    config.write_text(config.read_text() + "".join(f"{k} = {v}\n" for k, v in https.items()))
    producer = Producer({"bootstrap.servers": east.bootstrap})
    for i in range(50):
        producer.produce(topic, value=str(i).encode())
    assert producer.flush(30) == 0
    mirror = Mirror(config, tmp_path / "mirror.log")
    mirror.start()
    with mirror.watched():
        wait_for(lambda: len(copied(shared_broker.bootstrap, f"east.{topic}")) >= 50, 90, "the mirror to copy")
        with_certificate = pki.client_context()
        with_certificate.load_cert_chain(str(pki.client))
        url = f"https://127.0.0.1:{port}/connectors"
        with urllib.request.urlopen(url, timeout=10, context=with_certificate) as answer:
            assert "MirrorSourceConnector" in answer.read().decode()
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            urllib.request.urlopen(url, timeout=10, context=pki.client_context())  # no client certificate
        mirror.signal(signal.SIGTERM)
