"""The checker against synthetic histories: a clean one passes, and each kind of violation is caught."""

from __future__ import annotations

import copy
from typing import Any

from tests.support.checker import check


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
