"""The safety checker of the fault-injection suite: a pure function over a recorded history.

A history (a JSON-ready dict, see `tests/support/workload.py`) holds:

- `sends`: one entry per record a producer handed to its client: `value` (unique over the run),
  `producer` (one id per producer instance), `seq`, `partition`, and the outcome `status`: "acked" with
  the `offset` the acknowledgement gave and `ack_order` (the order acknowledgements reached that
  producer), "failed" with the `error`, or "pending" (never resolved: indeterminate).
- `reads`: `[consumer, partition, offset, value, time]` for every record a consumer read during the run.
- `final`: `{"partitions": {"<p>": {"end": <high watermark>, "records": [[offset, value], ...],
  "complete": bool}}}`: every partition read from offset 0 to its end once all faults were healed.

`check(history)` returns every violation of these properties:

| kind | property |
|---|---|
| lost | every acknowledged record is in the final log |
| moved | ... at the partition and offset its acknowledgement gave |
| duplicate | no record is in the final log more than once (acknowledged, failed or pending alike) |
| reordered | per partition and producer, acknowledged records are in the log in acknowledgement order |
| read-lost | every record a consumer read is in the final log at the same partition and offset |
| divergent | no offset is ever observed (by a consumer or the final read) holding two different records |
| phantom | every record in the final log was sent by the workload |
| incomplete-final | the final read reached the end of every partition; where it did not, records missing from
  that partition are counted as `unchecked_acks` rather than reported as lost |

Records that failed or stayed pending may be absent or present once: a failure is not a proof that the
write did not happen.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

KINDS = ("lost", "moved", "duplicate", "reordered", "read-lost", "divergent", "phantom", "incomplete-final")
MAX_SHOWN = 20


@dataclass(frozen=True)
class Violation:
    kind: str
    message: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "detail": dict(self.detail)}


@dataclass
class CheckResult:
    violations: list[Violation]
    stats: dict[str, Any]

    @property
    def ok(self) -> bool:
        return not self.violations

    def by_kind(self) -> dict[str, int]:
        return dict(Counter(v.kind for v in self.violations))

    def headline(self) -> str:
        return (f"records: {self.stats['sent']} sent, {self.stats['acked']} acknowledged, "
                f"{self.stats['failed']} failed, {self.stats['pending']} pending; "
                f"{self.stats['final_records']} in the final log, {self.stats['reads']} consumer reads")

    def summary(self, shown: int = MAX_SHOWN) -> str:
        lines = [self.headline()]
        if self.ok:
            lines.append("checker: no violation")
        else:
            counts = ", ".join(f"{kind} {count}" for kind, count in sorted(self.by_kind().items()))
            lines.append(f"checker: {len(self.violations)} violations ({counts})")
            lines += [f"  {v.kind}: {v.message}" for v in self.violations[:shown]]
            if len(self.violations) > shown:
                lines.append(f"  ... and {len(self.violations) - shown} more (all are in the saved history)")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "stats": self.stats, "by_kind": self.by_kind(),
                "violations": [v.as_dict() for v in self.violations]}


def _final_log(history: Mapping[str, Any]) -> tuple[dict[int, dict[int, str]], set[int], list[Violation]]:
    """Partition -> offset -> value of the final read, the partitions it did not read to the end, and the
    violations found while reading it."""
    log: dict[int, dict[int, str]] = {}
    incomplete: set[int] = set()
    problems: list[Violation] = []
    for key, part in sorted(history.get("final", {}).get("partitions", {}).items(), key=lambda kv: int(kv[0])):
        partition = int(key)
        offsets: dict[int, str] = {}
        for offset, value in part.get("records", []):
            offset = int(offset)
            if offset in offsets and offsets[offset] != value:
                problems.append(Violation("divergent", f"final read of partition {partition} returned offset "
                                          f"{offset} twice with different records: {offsets[offset]!r}, {value!r}",
                                          {"partition": partition, "offset": offset,
                                           "values": [offsets[offset], value]}))
            offsets[offset] = value
        log[partition] = offsets
        if not part.get("complete", False):
            incomplete.add(partition)
            problems.append(Violation("incomplete-final", f"the final read of partition {partition} stopped before "
                                      f"its end {part.get('end')} (read {len(offsets)} records)",
                                      {"partition": partition, "end": part.get("end"), "read": len(offsets)}))
    return log, incomplete, problems


def check(history: Mapping[str, Any]) -> CheckResult:
    """Every violation of the properties in the module docstring, most important kinds first."""
    sends: list[Mapping[str, Any]] = list(history.get("sends", []))
    reads: list[Iterable[Any]] = list(history.get("reads", []))
    final, incomplete, violations = _final_log(history)
    by_value = {s["value"]: s for s in sends}

    where: dict[str, list[tuple[int, int]]] = defaultdict(list)  # value -> [(partition, offset)] in the final log
    for partition, offsets in final.items():
        for offset, value in sorted(offsets.items()):
            where[value].append((partition, offset))

    acked = [s for s in sends if s.get("status") == "acked"]
    unchecked = 0
    for send in acked:
        value, expected = send["value"], (int(send["partition"]), int(send["offset"]))
        found = where.get(value, [])
        if not found and expected[0] in incomplete:
            unchecked += 1  # its partition was not read to the end: reported as incomplete-final
        elif not found:
            violations.append(Violation("lost", f"{value!r} was acknowledged at partition {expected[0]} offset "
                                        f"{expected[1]} but is not in the final log{_now_at(final, *expected)}",
                                        {"value": value, "partition": expected[0], "offset": expected[1]}))
        elif expected not in found:
            violations.append(Violation("moved", f"{value!r} was acknowledged at partition {expected[0]} offset "
                                        f"{expected[1]} but is at {_places(found)}{_now_at(final, *expected)}",
                                        {"value": value, "acked": list(expected), "found": [list(f) for f in found]}))

    for value, found in sorted(where.items()):
        if len(found) > 1:
            status = by_value[value]["status"] if value in by_value else "never sent"
            violations.append(Violation("duplicate", f"{value!r} ({status}) is in the final log {len(found)} times: "
                                        f"{_places(found)}", {"value": value, "found": [list(f) for f in found]}))
        if value not in by_value:
            violations.append(Violation("phantom", f"{value!r} is in the final log at {_places(found)} but was "
                                        "never sent", {"value": value, "found": [list(f) for f in found]}))

    violations += _reordered(acked, where)
    violations += _reads(reads, final, where, incomplete)
    order = {kind: i for i, kind in enumerate(KINDS)}
    violations.sort(key=lambda v: order.get(v.kind, len(order)))

    statuses = Counter(s.get("status") for s in sends)
    stats = {"sent": len(sends), "acked": statuses["acked"], "failed": statuses["failed"],
             "pending": statuses["pending"], "reads": len(reads),
             "final_records": sum(len(offsets) for offsets in final.values()), "unchecked_acks": unchecked,
             "unacked_present": sum(1 for s in sends if s.get("status") != "acked" and s["value"] in where)}
    return CheckResult(violations, stats)


def _reordered(acked: list[Mapping[str, Any]], where: Mapping[str, list[tuple[int, int]]]) -> list[Violation]:
    """Per (partition, producer): acknowledged records that sit in the log before one acknowledged earlier."""
    groups: dict[tuple[int, str], list[Mapping[str, Any]]] = defaultdict(list)
    for send in acked:
        groups[(int(send["partition"]), str(send["producer"]))].append(send)
    found: list[Violation] = []
    for (partition, producer), items in sorted(groups.items()):
        items.sort(key=lambda s: int(s["ack_order"]))
        previous: tuple[str, int] | None = None
        for send in items:
            places = [offset for p, offset in where.get(send["value"], []) if p == partition]
            if not places:
                continue  # lost or moved: reported as such
            offset = min(places)
            if previous is not None and offset <= previous[1]:
                found.append(Violation("reordered", f"producer {producer}, partition {partition}: {send['value']!r} "
                                       f"was acknowledged after {previous[0]!r} but is at offset {offset}, before "
                                       f"its offset {previous[1]}",
                                       {"partition": partition, "producer": producer,
                                        "earlier": list(previous), "later": [send["value"], offset]}))
            previous = (send["value"], offset)
    return found


def _reads(reads: list[Iterable[Any]], final: Mapping[int, Mapping[int, str]],
           where: Mapping[str, list[tuple[int, int]]], incomplete: set[int]) -> list[Violation]:
    found: list[Violation] = []
    seen: dict[tuple[int, int], dict[str, str]] = defaultdict(dict)  # (partition, offset) -> value -> who saw it
    reported: set[tuple[int, int, str]] = set()
    for consumer, partition, offset, value, *_ in reads:
        key = (int(partition), int(offset))
        seen[key].setdefault(value, f"consumer {consumer}")
        final_value = final.get(key[0], {}).get(key[1])
        if final_value is None and key[0] in incomplete:
            continue  # not read to the end finally: reported as incomplete-final
        if final_value != value and (*key, value) not in reported:
            reported.add((*key, value))
            elsewhere = where.get(value, [])
            now = f"is now at {_places(elsewhere)}" if elsewhere else "is not in the final log"
            found.append(Violation("read-lost", f"consumer {consumer} read {value!r} at partition {key[0]} offset "
                                   f"{key[1]}, which {now}{_now_at(final, *key)}",
                                   {"consumer": consumer, "partition": key[0], "offset": key[1], "value": value,
                                    "final_value": final_value, "found": [list(f) for f in elsewhere]}))
    for partition, offsets in final.items():
        for offset, value in offsets.items():
            seen[(partition, offset)].setdefault(value, "the final read")
    for (partition, offset), values in sorted(seen.items()):
        if len(values) > 1:
            shown = "; ".join(f"{value!r} by {who}" for value, who in values.items())
            found.append(Violation("divergent", f"partition {partition} offset {offset} was seen holding "
                                   f"{len(values)} different records: {shown}",
                                   {"partition": partition, "offset": offset, "values": dict(values)}))
    return found


def _places(found: Iterable[tuple[int, int]]) -> str:
    return ", ".join(f"partition {p} offset {o}" for p, o in found)


def _now_at(final: Mapping[int, Mapping[int, str]], partition: int, offset: int) -> str:
    value = final.get(partition, {}).get(offset)
    return f" (that offset now holds {value!r})" if value is not None else ""
