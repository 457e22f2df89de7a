"""Debezium's transaction metadata (`provide.transaction.metadata`), sans-I/O: the numbering of a transaction's
change events and the BEGIN and END records of the transaction topic.

Every change event of a captured transaction (not the tombstone after a delete) gets the envelope's
`transaction` block: the transaction id (PostgreSQL's xid, as text), its place among the transaction's events
(`total_order`, from 1) and among those of its table (`data_collection_order`). The transaction topic gets a
BEGIN record before the first event and an END record, with the count of events per table (`schema.table`, in
the order the tables first appeared), at the commit. A transaction that changes no captured table writes
neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from moldau.connect.data import Struct

from .envelope import TRANSACTION_SCHEMA, transaction_key_schema, transaction_table_schema, transaction_value_schema

__all__ = ["TransactionEvents"]

KEY_SCHEMA = transaction_key_schema()
VALUE_SCHEMA = transaction_value_schema()
_PER_TABLE_SCHEMA = transaction_table_schema()


@dataclass
class TransactionEvents:
    """The events of one transaction counted so far."""

    id: str
    ts_ms: int  # the commit time, as the records' ts_ms
    total: int = 0
    per_table: dict[str, int] = field(default_factory=dict)

    def number(self, table: str) -> Struct:
        """Count one more event of `table` (`schema.table`); its `transaction` block."""
        self.total += 1
        order = self.per_table[table] = self.per_table.get(table, 0) + 1
        return Struct(TRANSACTION_SCHEMA, {"id": self.id, "total_order": self.total, "data_collection_order": order})

    def key(self) -> Struct:
        return Struct(KEY_SCHEMA, {"id": self.id})

    def begin(self) -> Struct:
        return Struct(VALUE_SCHEMA, {"status": "BEGIN", "id": self.id, "ts_ms": self.ts_ms})

    def end(self) -> Struct:
        tables = [Struct(_PER_TABLE_SCHEMA, {"data_collection": name, "event_count": count})
                  for name, count in self.per_table.items()]
        return Struct(VALUE_SCHEMA, {"status": "END", "id": self.id, "event_count": self.total,
                                     "data_collections": tables, "ts_ms": self.ts_ms})
