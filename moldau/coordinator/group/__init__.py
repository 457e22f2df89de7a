"""The group coordinator: consumer groups, their membership protocol and their committed offsets.

Layers, innermost first:

- `member`, `classic`: one classic group's state machine (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), sans-I/O:
  time comes in as `now_ms`, pending requests are data (handles), completions come back as return values;
- `consumer`, `assignors`: one KIP-848 consumer group (ConsumerGroupHeartbeat), sans-I/O, changed only by
  replaying the records it asks to append, and its server-side assignors;
- `offsets`: committed offsets, those pending in open transactions (TxnOffsetCommit), and the rules for
  committing, fetching, deleting and expiring them;
- `records`: the durable form, records of the compacted topic `__consumer_offsets` (Kafka's binary schemas);
- `shard`: the groups and offsets of one `__consumer_offsets` partition, changed by replaying records;
- `coordinator`: the shards this broker leads (held by the shared skeleton `moldau.coordinator.shards`), the
  topic, appending records to the partition logs (a `CoordinatorLog`);
- `runtime`: the asyncio edge: futures for pending requests and a timer for the nearest deadline.

See docs/groups.md.
"""
