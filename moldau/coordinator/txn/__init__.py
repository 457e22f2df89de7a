"""The transaction coordinator (exactly-once transactions, `docs/transactions.md`).

- `transitions.py`: the sans-I/O rules of a transactional id's state, request by request;
- `records.py`: `__transaction_state`'s record format, as Kafka's TransactionLog writes it;
- `coordinator.py`: the shards (partitions led here) rebuilt by replay, and the requests' handling;
- `runtime.py`: its life in the broker: appends, waits for replication, markers, timers.
"""
