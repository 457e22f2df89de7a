"""The checker against synthetic histories: a clean one passes, and each kind of violation is caught."""

from __future__ import annotations

import copy
from typing import Any

from tests.support.checker import check
from tests.support.txn_checker import check_txn


def acked(value: str, partition: int, offset: int, order: int, producer: str = "p0") -> dict[str, Any]:
    return {"value": value, "producer": producer, "seq": order, "partition": partition, "status": "acked",
            "offset": offset, "ack_order": order}


def failed(value: str, partition: int, producer: str = "p0", status: str = "failed") -> dict[str, Any]:
    return {"value": value, "producer": producer, "seq": 99, "partition": partition, "status": status,
            "error": "KafkaError{code=_MSG_TIMED_OUT}"}


def final(partitions: dict[int, list[str]], complete: bool = True) -> dict[str, Any]:
    return {"partitions": {str(p): {"end": len(values), "complete": complete,
                                    "records": [[o, v] for o, v in enumerate(values)]}
                           for p, values in partitions.items()}}


def clean() -> dict[str, Any]:
    """Two producers over two partitions; one failed record that made it in, one that did not."""
    return {
        "sends": [acked("p0-0", 0, 0, 0), acked("p0-1", 1, 0, 1), acked("p0-2", 0, 1, 2),
                  acked("p1-0", 0, 2, 0, "p1"), acked("p1-1", 1, 2, 1, "p1"),
                  failed("p0-3", 1), failed("p1-2", 0, "p1", status="pending")],
        "reads": [["c0", 0, 0, "p0-0", 1.0], ["c0", 0, 1, "p0-2", 1.1], ["c0", 1, 0, "p0-1", 1.2],
                  ["c0", 0, 0, "p0-0", 2.0]],  # a re-read of the same record is fine
        "final": final({0: ["p0-0", "p0-2", "p1-0"], 1: ["p0-1", "p0-3", "p1-1"]}),
    }


def kinds(history: dict[str, Any]) -> dict[str, int]:
    return check(history).by_kind()


def test_a_clean_history_passes() -> None:
    result = check(clean())
    assert result.ok, result.summary()
    assert result.stats["acked"] == 5 and result.stats["failed"] == 1 and result.stats["pending"] == 1
    assert result.stats["unacked_present"] == 1
    assert "no violation" in result.summary()


def test_a_lost_acknowledged_record() -> None:
    history = clean()
    history["final"] = final({0: ["p0-0", "p0-2"], 1: ["p0-1", "p0-3", "p1-1"]})  # p1-0 is gone
    result = check(history)
    assert result.by_kind() == {"lost": 1}
    assert "'p1-0' was acknowledged at partition 0 offset 2" in result.violations[0].message


def test_a_duplicate() -> None:
    history = clean()
    history["final"] = final({0: ["p0-0", "p0-2", "p1-0", "p0-2"], 1: ["p0-1", "p0-3", "p1-1"]})
    assert kinds(history) == {"duplicate": 1}


def test_a_failed_record_present_twice_is_a_duplicate() -> None:
    history = clean()
    history["final"] = final({0: ["p0-0", "p0-2", "p1-0"], 1: ["p0-1", "p0-3", "p1-1", "p0-3"]})
    assert kinds(history) == {"duplicate": 1}


def test_a_moved_offset() -> None:
    history = clean()
    history["final"] = final({0: ["p0-0", "p0-2", "x", "p1-0"], 1: ["p0-1", "p0-3", "p1-1"]})
    assert kinds(history) == {"moved": 1, "phantom": 1}


def test_a_record_read_then_lost() -> None:
    history = clean()
    history["reads"].append(["c1", 1, 3, "p0-3", 3.0])  # read at offset 3 of partition 1, which ends at 2
    result = check(history)
    assert result.by_kind() == {"read-lost": 1}
    assert "consumer c1 read 'p0-3' at partition 1 offset 3, which is now at partition 1 offset 1" in \
        result.violations[0].message


def test_a_read_record_missing_from_the_final_log() -> None:
    history = clean()
    history["sends"].append(failed("p0-9", 1))
    history["reads"].append(["c0", 1, 3, "p0-9", 3.0])
    assert kinds(history) == {"read-lost": 1}


def test_reordering_within_a_producer_and_partition() -> None:
    history = clean()
    # p0-2 was acknowledged after p0-0 but sits before it
    history["final"] = final({0: ["p0-2", "p0-0", "p1-0"], 1: ["p0-1", "p0-3", "p1-1"]})
    history["reads"] = []
    result = check(history)
    assert result.by_kind() == {"moved": 2, "reordered": 1}
    reordered = next(v for v in result.violations if v.kind == "reordered")
    assert reordered.detail["producer"] == "p0" and reordered.detail["partition"] == 0


def test_an_offset_seen_holding_two_records() -> None:
    history = clean()
    history["reads"].append(["c1", 0, 1, "p1-0", 2.5])  # offset 1 was read as p1-0, finally holds p0-2
    result = check(history)
    assert result.by_kind() == {"read-lost": 1, "divergent": 1}
    divergent = next(v for v in result.violations if v.kind == "divergent")
    assert set(divergent.detail["values"]) == {"p1-0", "p0-2"}


def test_two_consumers_disagreeing_is_divergent_even_if_one_matches_the_final_log() -> None:
    history = clean()
    history["reads"].append(["c2", 1, 1, "p1-1", 2.0])
    assert kinds(history) == {"read-lost": 1, "divergent": 1}


def test_a_phantom_record() -> None:
    history = clean()
    history["final"]["partitions"]["1"]["records"].append([3, "nobody-sent-this"])
    assert kinds(history) == {"phantom": 1}


def test_an_incomplete_final_read() -> None:
    history = clean()
    history["final"]["partitions"]["0"]["complete"] = False
    assert kinds(history) == {"incomplete-final": 1}


def test_records_missing_from_an_incomplete_partition_are_unchecked_not_lost() -> None:
    history = clean()
    history["final"] = final({0: ["p0-0"], 1: ["p0-1", "p0-3", "p1-1"]}, complete=True)
    history["final"]["partitions"]["0"]["complete"] = False
    result = check(history)
    assert result.by_kind() == {"incomplete-final": 1}
    assert result.stats["unchecked_acks"] == 2


def test_the_checker_does_not_change_the_history() -> None:
    history = clean()
    before = copy.deepcopy(history)
    check(history)
    assert history == before


def test_the_summary_names_each_violation() -> None:
    history = clean()
    history["final"] = final({0: ["p0-0"], 1: []})
    result = check(history)
    assert not result.ok
    text = result.summary(shown=2)
    assert "violations" in text and "lost" in text and "more (all are in the saved history)" in text
    assert result.as_dict()["ok"] is False


# ---- transactional histories (tests/support/txn_checker.py)

def txn(name: str, status: str, *records: tuple[int, str], offsets: dict[str, int] | None = None,
        reason: str = "") -> dict[str, Any]:
    slot, number = (int(part) for part in name[1:].split("-"))
    return {"id": name, "slot": slot, "number": number, "instance": f"t{slot}#0", "status": status,
            "reason": reason, "records": [[p, v] for p, v in records], "offsets": dict(offsets or {})}


def log(partitions: dict[int, dict[int, str]], ends: dict[int, int]) -> dict[str, Any]:
    """A final read with gaps where commit/abort markers and (read_committed) aborted records are."""
    return {"partitions": {str(p): {"end": ends[p], "complete": True, "records": sorted(map(list, values.items()))}
                           for p, values in partitions.items()}}


def clean_txns() -> dict[str, Any]:
    """Slot 0 commits, aborts on purpose, commits; slot 1 ends unknown twice (once in, once out) and aborts
    after an error. Offsets between records hold the markers."""
    committed = {0: {0: "t0-0-0", 4: "t0-2-0", 6: "t1-0-0"}, 1: {0: "t0-0-1", 4: "t0-2-1", 6: "t1-0-1"}}
    uncommitted = {0: {**committed[0], 2: "t0-1-1"}, 1: {**committed[1], 2: "t0-1-0", 8: "t1-1-0"}}
    return {
        "txns": [txn("t0-0", "committed", (0, "t0-0-0"), (1, "t0-0-1"), offsets={"t0-0-0": 0, "t0-0-1": 0}),
                 txn("t0-1", "aborted", (1, "t0-1-0"), (0, "t0-1-1"), reason="deliberate"),
                 txn("t0-2", "committed", (0, "t0-2-0"), (1, "t0-2-1"), offsets={"t0-2-0": 4, "t0-2-1": 4}),
                 txn("t1-0", "unknown", (0, "t1-0-0"), (1, "t1-0-1")),
                 txn("t1-1", "unknown", (1, "t1-1-0"), (0, "t1-1-1")),
                 txn("t1-2", "aborted", (0, "t1-2-0"), reason="abortable error: _TIMED_OUT")],
        "reads": [["c0", 0, 0, "t0-0-0", 1.0], ["c0", 1, 4, "t0-2-1", 1.5]],
        "final": log(committed, {0: 8, 1: 10}),
        "final_uncommitted": log(uncommitted, {0: 8, 1: 10}),
    }


def txn_kinds(history: dict[str, Any]) -> dict[str, int]:
    return check_txn(history).by_kind()


def test_a_clean_transactional_history_passes() -> None:
    result = check_txn(clean_txns())
    assert result.ok, result.summary()
    stats = result.stats
    assert (stats["committed"], stats["aborted"], stats["aborted_deliberately"], stats["unknown"]) == (2, 2, 1, 2)
    assert (stats["unknown_in_log"], stats["unknown_absent"], stats["aborted_in_uncommitted_log"]) == (1, 1, 2)
    assert "6 begun, 2 committed, 2 aborted (1 on purpose), 2 unknown" in result.summary()


def test_a_consumer_reading_an_aborted_record() -> None:
    history = clean_txns()
    history["reads"].append(["c1", 1, 2, "t0-1-0", 2.0])
    result = check_txn(history)
    assert result.by_kind() == {"aborted-read": 1, "read-lost": 1}
    assert "consumer c1 (read_committed) read 't0-1-0'" in result.violations[0].message


def test_an_aborted_transaction_in_the_final_committed_log() -> None:
    history = clean_txns()
    history["final"] = copy.deepcopy(history["final_uncommitted"])  # as if t0-1 had been committed
    history["final"]["partitions"]["1"]["records"].pop()  # t1-1-0: t1-1 stays out
    result = check_txn(history)
    assert result.by_kind() == {"aborted-read": 1}
    assert result.violations[0].detail == {"txn": "t0-1", "reader": "final", "values": ["t0-1-0", "t0-1-1"]}


def test_a_torn_unknown_transaction() -> None:
    history = clean_txns()
    del history["final"]["partitions"]["1"]["records"][2]  # t1-0-1: t1-0 is now half in the log
    result = check_txn(history)
    assert result.by_kind() == {"torn": 1}
    assert result.violations[0].detail == {"txn": "t1-0", "status": "unknown", "found": ["t1-0-0"],
                                           "missing": ["t1-0-1"]}


def test_a_committed_transaction_torn_and_partly_lost() -> None:
    history = clean_txns()
    del history["final"]["partitions"]["0"]["records"][1]  # t0-2-0
    assert txn_kinds(history) == {"torn": 1, "lost": 1}


def test_a_lost_committed_transaction() -> None:
    history = clean_txns()
    for part in history["final"]["partitions"].values():
        part["records"] = [r for r in part["records"] if not r[1].startswith("t0-2-")]
    result = check_txn(history)
    assert result.by_kind() == {"lost": 1, "read-lost": 1}  # c0 had read t0-2-1
    lost = next(v for v in result.violations if v.kind == "lost")
    assert lost.detail["values"] == ["t0-2-0", "t0-2-1"] and "partition 0 offset 4" in lost.message


def test_a_transactional_duplicate() -> None:
    history = clean_txns()
    history["final"]["partitions"]["0"]["records"].append([7, "t0-0-0"])
    assert txn_kinds(history) == {"duplicate": 1}


def test_a_committed_record_moved_and_reordered() -> None:
    history = clean_txns()
    records = history["final"]["partitions"]["0"]["records"]
    records[0][1], records[1][1] = records[1][1], records[0][1]  # t0-2-0 before t0-0-0
    history["reads"] = []
    assert txn_kinds(history) == {"moved": 2, "reordered": 1, "divergent": 2}


def test_the_two_final_reads_disagreeing_is_divergent() -> None:
    history = clean_txns()
    history["final_uncommitted"]["partitions"]["1"]["records"][0][1] = "t1-1-1"
    result = check_txn(history)
    assert result.by_kind() == {"divergent": 1}
    assert "read_uncommitted" in result.violations[0].message


def test_a_transactional_phantom() -> None:
    history = clean_txns()
    history["final"]["partitions"]["1"]["records"].append([9, "nobody-wrote-this"])
    assert txn_kinds(history) == {"phantom": 1}


def test_an_open_transaction_counts_as_unknown() -> None:
    history = clean_txns()
    history["txns"][3]["status"] = "open"
    result = check_txn(history)
    assert result.ok and result.stats["unknown"] == 2


def test_a_transaction_held_back_by_an_incomplete_final_read_is_unchecked() -> None:
    history = clean_txns()
    part = history["final"]["partitions"]["1"]
    part["records"], part["complete"] = part["records"][:1], False  # stopped at an open transaction
    history["reads"] = []
    result = check_txn(history)
    assert result.by_kind() == {"incomplete-final": 1}
    assert result.stats["unchecked_records"] == 4  # t0-2-1, t1-0-1, and the absent t0-1-0 and t1-1-0
