"""End-to-end tests of the `moldau` command-line tools, run as subprocesses against a live broker.

The `broker` fixture (tests/compat/conftest.py) starts a real `moldau server` with its own data
directory and exposes its address as `.bootstrap`.
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_runner import default_sigint

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60


@dataclass
class Result:
    """Exit code and decoded output of one CLI run."""

    code: int
    out: str
    err: str


def _env(broker: Any, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "MOLDAU_BOOTSTRAP": broker.bootstrap, **(extra or {})}


def moldau(broker: Any, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> Result:
    """Run `python -m moldau ARGS` against the broker and wait for it to finish."""
    proc = subprocess.run(
        [sys.executable, "-m", "moldau", *args],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        env=_env(broker, env),
        timeout=TIMEOUT_S,
        check=False,
    )
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def ok(broker: Any, *args: str, stdin: bytes = b"") -> Result:
    """Run a command that must succeed."""
    result = moldau(broker, *args, stdin=stdin)
    assert result.code == 0, result.err
    return result


def assert_clean_error(result: Result, *fragments: str) -> None:
    """A failed command: non-zero exit and a one-line message, never a traceback."""
    assert result.code != 0
    assert "Traceback" not in result.err
    lines = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert lines, result.err
    for fragment in fragments:
        assert fragment in result.err, result.err


@pytest.fixture
def topic() -> str:
    """A topic name no other test uses."""
    return f"cli-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def filled(broker: Any, topic: str) -> str:
    """A one-partition topic holding three keyed records with two headers each."""
    ok(broker, "topics", "create", topic, "--partitions", "1")
    lines = b"k1:first\nk2:second\nk3:third\n"
    result = ok(broker, "produce", topic, "--key-separator", ":", "--header", "src=cli", "--header", "n=7", stdin=lines)
    assert f"produced 3 records to {topic}" in result.err
    return topic


def consume_all(broker: Any, topic: str, *args: str, count: int) -> Result:
    """Read `count` records from a chosen start; with a count of 0, wait a moment to see that none come."""
    if count == 0:
        return ok(broker, "consume", topic, "--timeout-ms", "1500", *args)
    # The idle timeout only keeps a broken broker from hanging the test.
    return ok(broker, "consume", topic, "--max-messages", str(count), "--timeout-ms", "15000", *args)


def partition_rows(describe_out: str) -> dict[int, list[str]]:
    """The partition table of `topics describe` output, keyed by partition id."""
    rows: dict[int, list[str]] = {}
    in_table = False
    for line in describe_out.splitlines():
        cells = line.split()
        if cells[:1] == ["PARTITION"]:
            in_table = True
        elif in_table and cells and cells[0].isdigit():
            rows[int(cells[0])] = cells
        elif not cells:
            in_table = False
    return rows


def test_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "moldau", "--version"], capture_output=True, cwd=REPO, check=True)
    assert proc.stdout.decode().startswith("moldau ")


def test_create_list_describe_delete(broker: Any, topic: str) -> None:
    created = ok(broker, "topics", "create", topic, "--partitions", "3", "--config", "retention.ms=123456")
    assert topic in created.out
    assert topic in ok(broker, "topics", "list").out.split()
    described = ok(broker, "topics", "describe", topic).out
    assert f"Topic: {topic}" in described
    assert "retention.ms=123456" in described
    rows = partition_rows(described)
    assert sorted(rows) == [0, 1, 2]
    assert all(row[-2:] == ["0", "0"] for row in rows.values())
    ok(broker, "topics", "delete", topic)
    assert topic not in ok(broker, "topics", "list").out.split()


def test_create_existing_topic(broker: Any, topic: str) -> None:
    ok(broker, "topics", "create", topic)
    assert_clean_error(moldau(broker, "topics", "create", topic), f"topic '{topic}' already exists")
    assert "already exists" in ok(broker, "topics", "create", topic, "--if-not-exists").out


def test_alter_partitions_and_configs(broker: Any, topic: str) -> None:
    ok(broker, "topics", "create", topic, "--partitions", "1")
    ok(broker, "topics", "alter", topic, "--partitions", "4")
    assert sorted(partition_rows(ok(broker, "topics", "describe", topic).out)) == [0, 1, 2, 3]
    ok(broker, "topics", "alter", topic, "--config", "retention.ms=1000", "--config", "max.message.bytes=5000")
    assert "retention.ms=1000" in ok(broker, "topics", "describe", topic).out
    ok(broker, "topics", "alter", topic, "--delete-config", "retention.ms")
    described = ok(broker, "topics", "describe", topic).out
    assert "retention.ms" not in described
    assert "max.message.bytes=5000" in described


def test_alter_needs_a_change(broker: Any, topic: str) -> None:
    assert_clean_error(moldau(broker, "topics", "alter", topic), "nothing to alter")


@pytest.mark.parametrize(
    "command",
    [
        ["topics", "describe"],
        ["topics", "delete"],
        ["topics", "alter", "--partitions", "3"],
        ["consume", "--from-beginning"],
        ["produce"],
    ],
)
def test_unknown_topic(broker: Any, topic: str, command: list[str]) -> None:
    args = [*command[:2], topic, *command[2:]] if command[0] == "topics" else [command[0], topic, *command[1:]]
    result = moldau(broker, *args, stdin=b"x\n")
    assert_clean_error(result, f"topic '{topic}' does not exist", "UNKNOWN_TOPIC_OR_PARTITION")


def test_unreachable_broker() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "moldau", "topics", "list", "--bootstrap-server", "127.0.0.1:1"],
        capture_output=True,
        cwd=REPO,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert_clean_error(Result(result.returncode, "", result.stderr.decode()), "cannot connect")


def test_consume_formats(broker: Any, filled: str) -> None:
    values = consume_all(broker, filled, "--from-beginning", count=3)
    assert values.out.splitlines() == ["first", "second", "third"]
    assert "consumed 3 records" in values.err
    kv = consume_all(broker, filled, "--from-beginning", "--format", "kv", count=3)
    assert kv.out.splitlines() == ["k1\tfirst", "k2\tsecond", "k3\tthird"]
    full = consume_all(broker, filled, "--from-beginning", "--format", "full", count=1)
    line = full.out.splitlines()[0]
    assert line.startswith(f"{filled}/0@0  ")
    assert line.endswith("key=k1  value=first  headers=src=cli,n=7")
    template = consume_all(broker, filled, "--from-beginning", "--format", r"%T|%p|%o|%k|%v|%h|%s|%K|%%", count=3)
    assert template.out.splitlines()[2] == f"{filled}|0|2|k3|third|src=cli,n=7|5|2|%"


def test_consume_json(broker: Any, filled: str) -> None:
    before_ms = int(time.time() * 1000) - 60_000
    out = consume_all(broker, filled, "--from-beginning", "--format", "json", count=3).out
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [
        (0, "k1", "first"),
        (1, "k2", "second"),
        (2, "k3", "third"),
    ]
    assert all(r["topic"] == filled and r["partition"] == 0 for r in records)
    assert all(r["headers"] == [["src", "cli"], ["n", "7"]] for r in records)
    assert all(r["timestamp"] > before_ms for r in records)


def test_consume_from_offset(broker: Any, filled: str) -> None:
    assert consume_all(broker, filled, "--offset", "1", count=2).out.splitlines() == ["second", "third"]
    assert consume_all(broker, filled, "--offset", "99", count=0).out == ""


def test_consume_from_time(broker: Any, filled: str) -> None:
    time.sleep(1.1)
    cut_ms = int(time.time() * 1000)
    time.sleep(0.1)
    ok(broker, "produce", filled, stdin=b"fourth\nfifth\n")
    assert consume_all(broker, filled, "--from-time", str(cut_ms), count=2).out.splitlines() == ["fourth", "fifth"]
    iso = datetime.fromtimestamp(cut_ms / 1000, tz=UTC).isoformat()
    assert consume_all(broker, filled, "--from-time", iso, count=2).out.splitlines() == ["fourth", "fifth"]
    assert consume_all(broker, filled, "--from-time", "2999-01-01T00:00:00", count=0).out == ""


def test_partitions(broker: Any, topic: str) -> None:
    ok(broker, "topics", "create", topic, "--partitions", "3")
    ok(broker, "produce", topic, "--partition", "2", stdin=b"a\nb\n")
    ok(broker, "produce", topic, "--partition", "0", stdin=b"c\n")
    assert consume_all(broker, topic, "--from-beginning", "--partition", "2", count=2).out.splitlines() == ["a", "b"]
    everything = consume_all(broker, topic, "--from-beginning", "--format", "%p %v", count=3).out.splitlines()
    assert sorted(everything) == ["0 c", "2 a", "2 b"]
    rows = partition_rows(ok(broker, "topics", "describe", topic).out)
    assert [rows[p][-1] for p in (0, 1, 2)] == ["1", "0", "2"]
    assert_clean_error(moldau(broker, "consume", topic, "--partition", "5"), "no partition 5")
    assert_clean_error(moldau(broker, "produce", topic, "--partition", "5", stdin=b"x\n"), "no partition 5")


def test_binary_and_null_keys(broker: Any, topic: str) -> None:
    ok(broker, "topics", "create", topic, "--partitions", "1")
    ok(broker, "produce", topic, stdin=b"caf\xc3\xa9\n\xff\xfe raw\n")
    out = consume_all(broker, topic, "--from-beginning", "--format", "full", count=2).out.splitlines()
    assert out[0].endswith("key=null  value=café  headers=")
    assert out[1].endswith("key=null  value=\\xff\\xfe raw  headers=")


def test_produce_options(broker: Any, topic: str) -> None:
    ok(broker, "topics", "create", topic, "--partitions", "1")
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        ok(broker, "produce", topic, "--compression", codec, "--acks", "1", "--linger-ms", "0", stdin=b"v\n")
    result = moldau(broker, "produce", topic, "--key-separator", "=", stdin=b"a=1\nno separator\n")
    assert_clean_error(result, "line 2 has no key separator")
    assert "produced 1 record to" in result.err
    assert consume_all(broker, topic, "--from-beginning", count=5).out.splitlines() == ["v", "v", "v", "v", "1"]


def test_produce_from_file(broker: Any, topic: str, tmp_path: Path) -> None:
    ok(broker, "topics", "create", topic, "--partitions", "1")
    source = tmp_path / "lines.txt"
    source.write_bytes(b"one\r\ntwo\n\nthree")
    assert "produced 4 records" in ok(broker, "produce", topic, "--file", str(source)).err
    assert consume_all(broker, topic, "--from-beginning", count=4).out.split("\n") == ["one", "two", "", "three", ""]


def test_consume_tails_new_records_and_stops_on_interrupt(broker: Any, filled: str) -> None:
    tail = subprocess.Popen(
        [sys.executable, "-m", "moldau", "consume", filled],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=_env(broker),
        preexec_fn=default_sigint,
    )
    try:
        # Give the tail time to resolve the log end before the new record lands.
        time.sleep(3)
        ok(broker, "produce", filled, stdin=b"latest\n")
        time.sleep(2)
        tail.send_signal(signal.SIGINT)
        out, err = tail.communicate(timeout=TIMEOUT_S)
    finally:
        tail.kill()
    assert tail.returncode == 0
    assert out.decode().splitlines() == ["latest"]
    assert f"consumed 1 record from {filled}" in err.decode()


def test_consume_uses_no_consumer_group(broker: Any, filled: str) -> None:
    # librdkafka's protocol debug log lists every request the client sends.
    result = moldau(
        broker,
        "consume",
        filled,
        "--from-beginning",
        "--max-messages",
        "3",
        env={"MOLDAU_CLIENT_DEBUG": "protocol"},
    )
    assert result.code == 0, result.err
    assert "Sent FetchRequest" in result.err
    for request in ("JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "LeaveGroup", "OffsetFetch"):
        assert f"Sent {request}Request" not in result.err
