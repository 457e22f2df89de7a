"""The share coordinator (KIP-932): the durable state of share-partitions in the compacted internal topic
`__share_group_state`, read and written by share-partition leaders (ReadShareGroupState, WriteShareGroupState).

- `records`: the ShareSnapshot records, in Kafka's format;
- `coordinator`: the snapshots of the `__share_group_state` partitions led here, loaded by replay, and writes
  acknowledged only once durable;
- `pending_writes`: the writes waiting to be appended together, one batch per partition, as the append linger says.
"""
