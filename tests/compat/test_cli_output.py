"""The `moldau` CLI for scripts and for people, against a real broker process: `--output json` on the describe and
list commands (one JSON document on stdout, the same facts as the tables), progress bars on stderr only when it is a
terminal, and `moldau top --once` (rates from end offsets and log sizes, group lag).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.support.broker_process import BrokerProcess
from tests.support.cli_runner import REPO, default_sigint, moldau, ok

RECORDS = 40


def new_topic(broker: BrokerProcess, partitions: int = 2) -> str:
    topic = f"out-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    return topic


def produce(broker: BrokerProcess, topic: str, count: int, size: int = 10) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.metrics.push": False})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=b"x" * size)
    assert producer.flush(15) == 0


def consume_and_commit(broker: BrokerProcess, topic: str, group: str, count: int) -> None:
    """A classic-group consumer reads `count` records and commits them."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "enable.metrics.push": False})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    while got < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    assert got == count
    consumer.commit(asynchronous=False)
    consumer.close()


@pytest.fixture(scope="module")
def workload(shared_broker: BrokerProcess) -> Iterator[tuple[str, str]]:
    """A topic of two partitions with RECORDS + 10 records, and a classic group that committed the first RECORDS
    of them: 10 records behind."""
    topic, group = new_topic(shared_broker), f"out-group-{uuid.uuid4().hex[:6]}"
    produce(shared_broker, topic, RECORDS)
    consume_and_commit(shared_broker, topic, group, RECORDS)
    produce(shared_broker, topic, 10)  # the group is now 10 records behind
    yield topic, group


def as_json(broker: BrokerProcess, *args: str) -> Any:
    """Run a command with --output json: stdout must be exactly one JSON document."""
    return json.loads(ok(broker.bootstrap, *args, "--output", "json"))


def test_topics_and_groups_describe_as_json(shared_broker: BrokerProcess, workload: tuple[str, str]) -> None:
    topic, group = workload
    assert topic in as_json(shared_broker, "topics", "list")
    (described,) = as_json(shared_broker, "topics", "describe", topic)
    assert (described["topic"], described["partition_count"], described["replication_factor"]) == (topic, 2, 1)
    assert sum(p["latest"] for p in described["partitions"]) == RECORDS + 10
    assert all(p["leader"] == p["replicas"][0] == p["isr"][0] for p in described["partitions"])
    assert {"group": group, "type": "classic", "state": "Empty"} in as_json(shared_broker, "groups", "list")
    (group_doc,) = as_json(shared_broker, "groups", "describe", group)
    assert (group_doc["type"], group_doc["state"], group_doc["members"]) == ("classic", "Empty", [])
    assert group_doc["coordinator"]["id"] == 1
    offsets = group_doc["offsets"]
    assert sum(o["lag"] for o in offsets) == 10  # lag = log end offset - committed, per partition
    assert all(o["lag"] == o["log_end_offset"] - o["current_offset"] for o in offsets)
    table = ok(shared_broker.bootstrap, "groups", "describe", group)  # the same facts, for people
    assert "CURRENT-OFFSET" in table and "{" not in table


def test_every_other_describe_and_list_command_prints_one_json_document(shared_broker: BrokerProcess) -> None:
    features = {f["feature"]: f for f in as_json(shared_broker, "features", "describe")}
    assert features["share.version"]["supported_max"] >= 1
    # The shared broker holds what other tests made (Spark's sinks commit transactions on it): each list is one JSON
    # document, whatever it holds.
    assert isinstance(as_json(shared_broker, "quotas", "describe"), list)
    listed = as_json(shared_broker, "transactions", "list")
    assert isinstance(listed, list) and all({"transactional_id", "state"} <= set(t) for t in listed)
    assert not any(t["transactional_id"] == "out-txn" for t in listed)
    assert isinstance(as_json(shared_broker, "client-metrics", "list"), list)
    assert isinstance(as_json(shared_broker, "client-metrics", "describe"), list)
    assert isinstance(as_json(shared_broker, "users", "list"), list)
    configs = {c["name"]: c for c in as_json(shared_broker, "groups", "configs", "any-group")}
    assert configs["share.delivery.count.limit"]["source"] == "DEFAULT_CONFIG"
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "transactional.id": "out-txn",
                         "enable.metrics.push": False})
    producer.init_transactions(15)
    txn = as_json(shared_broker, "transactions", "describe", "--transactional-id", "out-txn")
    assert (txn["transactional_id"], txn["state"], txn["partitions"]) == ("out-txn", "Empty", [])
    assert any(t["transactional_id"] == "out-txn" for t in as_json(shared_broker, "transactions", "list"))


def test_a_bad_output_choice_is_a_usage_error(shared_broker: BrokerProcess) -> None:
    result = moldau(shared_broker.bootstrap, "topics", "list", "--output", "yaml")
    assert result.returncode == 2 and "invalid choice" in result.stderr and not result.stdout


def test_top_once_shows_rates_and_group_lag(shared_broker: BrokerProcess, workload: tuple[str, str]) -> None:
    topic, group = workload
    busy = new_topic(shared_broker, partitions=1)
    stop = threading.Event()

    def keep_producing() -> None:
        while not stop.is_set():
            produce(shared_broker, busy, 50, size=100)
            time.sleep(0.05)

    writer = threading.Thread(target=keep_producing)
    writer.start()
    try:
        frame = as_json(shared_broker, "top", "--once", "--interval", "1.5", "--topic", busy, "--topic", topic)
    finally:
        stop.set()
        writer.join()
    topics = {t["topic"]: t for t in frame["topics"]}
    assert topics[busy]["messages_per_s"] > 0 and topics[busy]["bytes_per_s"] > topics[busy]["messages_per_s"] * 100
    assert topics[topic]["messages_per_s"] == 0 and topics[topic]["end_offset"] == RECORDS + 10
    assert topics[topic]["size_bytes"] > 0
    groups = {g["group"]: g for g in frame["groups"]}
    assert groups[group]["lag"] == 10 and groups[group]["type"] == "classic"
    text = ok(shared_broker.bootstrap, "top", "--once", "--interval", "0.2", "--topic", topic)
    assert "MSG/S" in text and "BYTES/S" in text and topic in text and group in text
    assert "\033[" not in text  # no screen clearing when stdout is not a terminal


def run_with_terminal_stderr(*args: str) -> tuple[int, str, str]:
    """Run `moldau ARGS` with stderr on a pseudo-terminal (80x24) and stdout on a pipe."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "moldau", *args], stdout=subprocess.PIPE, stderr=follower,
                            stdin=subprocess.DEVNULL, cwd=REPO)
    os.close(follower)
    stdout: list[bytes] = []
    reader = threading.Thread(target=lambda: stdout.append(proc.stdout.read() if proc.stdout else b""))
    reader.start()
    terminal = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        terminal.append(chunk)
    os.close(leader)
    code = proc.wait(60)
    reader.join()
    return code, b"".join(stdout).decode(), b"".join(terminal).decode(errors="replace")


def test_progress_bars_only_on_a_terminal(shared_broker: BrokerProcess, tmp_path: Path) -> None:
    topic = new_topic(shared_broker, partitions=1)
    lines = 30_000
    source = tmp_path / "records.txt"
    source.write_text("".join(f"record {i:06d} " + "y" * 40 + "\n" for i in range(lines)))
    code, out, terminal = run_with_terminal_stderr("produce", topic, "--file", str(source), "-b",
                                                   shared_broker.bootstrap)
    assert code == 0, terminal
    assert "producing records.txt" in terminal and "B/s" in terminal  # a bar with a rate
    assert f"produced {lines} records to {topic}" in terminal and out == ""
    code, out, terminal = run_with_terminal_stderr("consume", topic, "--from-beginning", "--max-messages", "20000",
                                                   "-b", shared_broker.bootstrap)
    assert code == 0, terminal
    assert f"consuming {topic}" in terminal and "rec/s" in terminal
    assert len(out.splitlines()) == 20000 and "consuming" not in out
    group = f"reset-{uuid.uuid4().hex[:6]}"
    committer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group,
                          "enable.metrics.push": False})
    committer.commit(offsets=[TopicPartition(topic, 0, 500)], asynchronous=False)
    committer.close()
    code, out, terminal = run_with_terminal_stderr("groups", "reset-offsets", group, "--topic", topic,
                                                   "--to-earliest", "--execute", "-b", shared_broker.bootstrap)
    assert code == 0, terminal
    assert f"resetting {group}" in terminal and "partition/s" in terminal
    assert "committed 1 offset" in terminal and [topic, "0", "500", "0"] in [line.split() for line in out.splitlines()]
    # The same commands with stderr on a pipe, as in a script: no bar, only the summary.
    piped = moldau(shared_broker.bootstrap, "consume", topic, "--from-beginning", "--max-messages", "100")
    assert piped.returncode == 0 and piped.stderr == f"consumed 100 records from {topic}\n"
    produced = subprocess.run([sys.executable, "-m", "moldau", "produce", topic, "--file", str(source), "-b",
                               shared_broker.bootstrap], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert produced.returncode == 0 and produced.stderr == f"produced {lines} records to {topic}\n"


def test_top_redraws_on_a_terminal_until_interrupted(shared_broker: BrokerProcess) -> None:
    topic = new_topic(shared_broker, partitions=1)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "moldau", "top", "--interval", "0.3", "--no-groups", "-b",
                             shared_broker.bootstrap], stdout=follower, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, cwd=REPO, preexec_fn=default_sigint)
    os.close(follower)
    screen = b""
    deadline = time.monotonic() + 30
    # Three whole frames: the fourth has begun (a read may end in the middle of a frame).
    while screen.count(b"moldau top") < 4 and time.monotonic() < deadline:
        screen += os.read(leader, 65536)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
    os.close(leader)
    frames = screen.split(b"\033[H\033[2J")  # each frame starts by clearing the screen
    assert len(frames) >= 5 and all(b"MSG/S" in frame and topic.encode() in frame for frame in frames[1:4])


def test_quorum_describe_as_json(shared_broker: BrokerProcess) -> None:
    status = json.loads(ok(shared_broker.bootstrap, "quorum", "describe", "-o", "json"))
    assert status["leader_id"] == 1 and [voter["id"] for voter in status["current_voters"]] == [1]
    assert status["high_watermark"] > 0 and status["current_observers"] == []
    rows = json.loads(ok(shared_broker.bootstrap, "quorum", "describe", "--replication", "-o", "json"))
    assert [(row["node_id"], row["status"]) for row in rows] == [(1, "Leader")], rows
    assert rows[0]["log_end_offset"] >= status["high_watermark"]
