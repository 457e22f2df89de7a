"""The transaction coordinator (exactly-once transactions, `docs/transactions.md`).

- `transitions.py`: the sans-I/O rules of a transactional id's state, request by request;
- `records.py`: `__transaction_state`'s record format, as Kafka's TransactionLog writes it;
- `coordinator.py`: the shards (partitions led here, held by the shared skeleton `moldau.coordinator.shards`)
  rebuilt by replaying the log (a `CoordinatorLog`), and the requests' handling;
- `runtime.py`: its life in the broker: waits for the log to make writes durable, markers, timers.
"""
