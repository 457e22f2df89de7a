"""The checker of transactional histories (`tests/support/txn_workload.py`): a pure function, like `check`.

A transactional history holds, besides `reads` and `final` as in `tests/support/checker.py` (both read with
read_committed):

- `txns`: one entry per transaction: `id`, `slot` (the transactional.id), `number` (its order within the
  slot), `records` (`[partition, value]`, values unique over the run), `offsets` (value -> offset from a
  delivery report) and `status`: "committed", "aborted" or "unknown" ("open" counts as unknown).
- `final_uncommitted`: the same final read with read_uncommitted, where aborted records are visible.

`check_txn(history)` returns every violation of these properties:

| kind | property |
|---|---|
| aborted-read | no read_committed read (a consumer's, or the final read) returns a record of an aborted transaction |
| torn | the final log holds all or none of each transaction's records (whatever its status) |
| lost | every record of a committed transaction is in the final log |
| moved | ... at the offset its delivery report gave |
| duplicate | no record is in the final log more than once |
| reordered | per slot and partition, committed records are in the log in the order the slot wrote them |
| read-lost | every record a consumer read is in the final log at the same partition and offset |
| divergent | no offset is seen holding two different records (by consumers and both final reads) |
| phantom | every record in the final log was written by the workload |
| incomplete-final | the final read reached the end of every partition (an open transaction would hold it back) |

An "unknown" transaction may be wholly in the log or wholly absent. Where the final read did not reach the
end of a partition, a record missing from it is counted as unchecked rather than lost or torn.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from tests.support.checker import CheckResult, Violation, _final_log, _places, _reads

KINDS = ("aborted-read", "torn", "lost", "moved", "duplicate", "reordered", "read-lost", "divergent", "phantom",
         "incomplete-final")

Where = Mapping[str, list[tuple[int, int]]]


class TxnCheckResult(CheckResult):
    def headline(self) -> str:
        s = self.stats
        return (f"transactions: {s['txns']} begun, {s['committed']} committed, {s['aborted']} aborted "
                f"({s['aborted_deliberately']} on purpose), {s['unknown']} unknown ({s['unknown_in_log']} in the "
                f"log, {s['unknown_absent']} absent); {s['records']} records, {s['final_records']} in the final "
                f"committed log, {s['aborted_in_uncommitted_log']} aborted ones in the uncommitted log, "
                f"{s['reads']} consumer reads")


def check_txn(history: Mapping[str, Any]) -> TxnCheckResult:
    """Every violation of the properties in the module docstring, most important kinds first."""
    txns: list[Mapping[str, Any]] = list(history.get("txns", []))
    reads: list[Iterable[Any]] = list(history.get("reads", []))
    final, incomplete, violations = _final_log(history)
    uncommitted, _, _ = _final_log({"final": history.get("final_uncommitted", {})})
    where = _where(final)
    owner = {value: txn for txn in txns for _, value in txn["records"]}

    unchecked = 0
    for txn in txns:
        found, missing, unsure = _presence(txn, where, incomplete)
        unchecked += len(unsure)
        violations += _atomicity(txn, found, missing, where)
    violations += _aborted_reads(reads, owner)
    violations += _duplicates_and_phantoms(where, owner)
    violations += _reordered(txns, where)
    violations += _reads(reads, final, where, incomplete)
    violations += _diverging_finals(final, uncommitted)
    order = {kind: i for i, kind in enumerate(KINDS)}
    violations.sort(key=lambda v: order.get(v.kind, len(order)))
    return TxnCheckResult(violations, _stats(txns, reads, final, uncommitted, where, unchecked))


def _where(final: Mapping[int, Mapping[int, str]]) -> dict[str, list[tuple[int, int]]]:
    """value -> [(partition, offset)] in a final log."""
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for partition, offsets in final.items():
        for offset, value in sorted(offsets.items()):
            where[value].append((partition, offset))
    return where


def _status(txn: Mapping[str, Any]) -> str:
    status = str(txn.get("status"))
    return status if status in ("committed", "aborted") else "unknown"


def _presence(txn: Mapping[str, Any], where: Where, incomplete: set[int]) -> tuple[list[str], list[str], list[str]]:
    """The transaction's values in the final log, absent from it, and absent from a partition not read to
    its end (which proves nothing)."""
    found, missing, unsure = [], [], []
    for partition, value in txn["records"]:
        if where.get(value):
            found.append(value)
        elif int(partition) in incomplete:
            unsure.append(value)
        else:
            missing.append(value)
    return found, missing, unsure


def _atomicity(txn: Mapping[str, Any], found: list[str], missing: list[str], where: Where) -> list[Violation]:
    status, name = _status(txn), txn["id"]
    out: list[Violation] = []
    if status == "aborted" and found:
        out.append(Violation("aborted-read", f"the final read_committed read returned {len(found)} records of "
                             f"aborted transaction {name} ({txn.get('reason') or 'no reason'}): {found}",
                             {"txn": name, "reader": "final", "values": found}))
    if found and missing:
        out.append(Violation("torn", f"{status} transaction {name} is partly in the final log: {found} are, "
                             f"{missing} are not", {"txn": name, "status": status, "found": found,
                                                    "missing": missing}))
    if status == "committed" and missing:
        out.append(Violation("lost", f"committed transaction {name} lost {missing} (delivered at "
                             f"{_delivered(txn, missing)})", {"txn": name, "values": missing}))
    if status == "committed":
        out += _moved(txn, found, where)
    return out


def _delivered(txn: Mapping[str, Any], values: Iterable[str]) -> str:
    partitions = {value: partition for partition, value in txn["records"]}
    offsets = txn.get("offsets", {})
    return ", ".join(f"{value} partition {partitions[value]} offset {offsets.get(value, '?')}" for value in values)


def _moved(txn: Mapping[str, Any], found: list[str], where: Where) -> list[Violation]:
    """Committed records that are not where their delivery report put them."""
    partitions = {value: int(partition) for partition, value in txn["records"]}
    out: list[Violation] = []
    for value in found:
        offset = txn.get("offsets", {}).get(value)
        if offset is None or (partitions[value], int(offset)) in where[value]:
            continue
        out.append(Violation("moved", f"{value!r} of committed transaction {txn['id']} was delivered at partition "
                             f"{partitions[value]} offset {offset} but is at {_places(where[value])}",
                             {"txn": txn["id"], "value": value, "delivered": [partitions[value], int(offset)],
                              "found": [list(f) for f in where[value]]}))
    return out


def _aborted_reads(reads: list[Iterable[Any]], owner: Mapping[str, Mapping[str, Any]]) -> list[Violation]:
    out: list[Violation] = []
    reported: set[tuple[str, str]] = set()
    for consumer, partition, offset, value, *_ in reads:
        txn = owner.get(value)
        if txn is None or _status(txn) != "aborted" or (consumer, txn["id"]) in reported:
            continue
        reported.add((consumer, txn["id"]))
        out.append(Violation("aborted-read", f"consumer {consumer} (read_committed) read {value!r} at partition "
                             f"{partition} offset {offset}, a record of aborted transaction {txn['id']}",
                             {"txn": txn["id"], "reader": consumer, "value": value, "partition": partition,
                              "offset": offset}))
    return out


def _duplicates_and_phantoms(where: Where, owner: Mapping[str, Mapping[str, Any]]) -> list[Violation]:
    out: list[Violation] = []
    for value, found in sorted(where.items()):
        if len(found) > 1:
            status = _status(owner[value]) if value in owner else "never written"
            out.append(Violation("duplicate", f"{value!r} ({status}) is in the final log {len(found)} times: "
                                 f"{_places(found)}", {"value": value, "found": [list(f) for f in found]}))
        if value not in owner:
            out.append(Violation("phantom", f"{value!r} is in the final log at {_places(found)} but was never "
                                 "written", {"value": value, "found": [list(f) for f in found]}))
    return out


def _reordered(txns: list[Mapping[str, Any]], where: Where) -> list[Violation]:
    """Per (slot, partition): committed records at an offset not after the slot's previous committed record.

    A slot ends each transaction before it begins the next, so its committed records must follow each other in
    the log in (transaction, record) order.
    """
    groups: dict[tuple[int, int], list[tuple[int, int, str]]] = defaultdict(list)
    for txn in txns:
        if _status(txn) != "committed":
            continue
        for index, (partition, value) in enumerate(txn["records"]):
            groups[(int(txn["slot"]), int(partition))].append((int(txn["number"]), index, value))
    out: list[Violation] = []
    for (slot, partition), items in sorted(groups.items()):
        previous: tuple[str, int] | None = None
        for _number, _index, value in sorted(items):
            offsets = [offset for p, offset in where.get(value, []) if p == partition]
            if not offsets:
                continue  # lost or torn: reported as such
            if previous is not None and min(offsets) <= previous[1]:
                out.append(Violation("reordered", f"slot {slot}, partition {partition}: {value!r} was written after "
                                     f"{previous[0]!r} but is at offset {min(offsets)}, before its offset "
                                     f"{previous[1]}", {"slot": slot, "partition": partition,
                                                        "earlier": list(previous), "later": [value, min(offsets)]}))
            previous = (value, min(offsets))
    return out


def _diverging_finals(final: Mapping[int, Mapping[int, str]],
                      uncommitted: Mapping[int, Mapping[int, str]]) -> list[Violation]:
    """Offsets the read_committed and read_uncommitted final reads saw holding different records."""
    out: list[Violation] = []
    for partition, offsets in sorted(final.items()):
        for offset, value in sorted(offsets.items()):
            other = uncommitted.get(partition, {}).get(offset)
            if other is not None and other != value:
                out.append(Violation("divergent", f"partition {partition} offset {offset} holds {value!r} for the "
                                     f"read_committed final read and {other!r} for the read_uncommitted one",
                                     {"partition": partition, "offset": offset,
                                      "values": {value: "the final read", other: "the read_uncommitted final read"}}))
    return out


def _stats(txns: list[Mapping[str, Any]], reads: list[Iterable[Any]], final: Mapping[int, Mapping[int, str]],
           uncommitted: Mapping[int, Mapping[int, str]], where: Where, unchecked: int) -> dict[str, Any]:
    statuses = Counter(_status(t) for t in txns)
    in_uncommitted = {value for offsets in uncommitted.values() for value in offsets.values()}
    unknown = [t for t in txns if _status(t) == "unknown"]
    return {
        "txns": len(txns), "committed": statuses["committed"], "aborted": statuses["aborted"],
        "aborted_deliberately": sum(1 for t in txns if _status(t) == "aborted" and t.get("reason") == "deliberate"),
        "unknown": statuses["unknown"],
        "unknown_in_log": sum(1 for t in unknown if t["records"] and all(where.get(v) for _, v in t["records"])),
        "unknown_absent": sum(1 for t in unknown if not any(where.get(v) for _, v in t["records"])),
        "records": sum(len(t["records"]) for t in txns), "reads": len(reads),
        "final_records": sum(len(offsets) for offsets in final.values()),
        "uncommitted_records": len(in_uncommitted),
        "aborted_in_uncommitted_log": sum(1 for t in txns if _status(t) == "aborted"
                                          for _, v in t["records"] if v in in_uncommitted),
        "unchecked_records": unchecked,
    }
