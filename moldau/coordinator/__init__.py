"""Coordinators: brokers that own state keyed by an id, placed on the partitions of an internal compacted topic,
so whichever broker leads the partition coordinates the id.

- `moldau.coordinator.group`: consumer groups (classic and KIP-848) and their committed offsets, in
  `__consumer_offsets`;
- `moldau.coordinator.txn`: transactional ids, their producer epochs and open transactions, in
  `__transaction_state`.

What every coordinator shares:

- `shards.py`: the skeleton: a key's partition and coordinator node, the shards of the partitions led here,
  loaded by replaying their log and unloaded as the metadata image moves; a coordinator supplies its shard type
  and how its records replay into it;
- `log.py`: `CoordinatorLog`, the record log a coordinator appends to, waits on and replays (and the decoding of
  what it reads back);
- `internal_topic.py`: the batches coordinators append (in the codec their topic's config names), and
  `ReplicaLog`, the `CoordinatorLog` over the broker's replica manager, which loads in reads of the load buffer size;
- `append_linger.py`: when the writes a coordinator lets wait are appended together (Kafka's append linger), and
  `flush_scheduler.py`, which arranges that append on the event loop;
- `record_codec.py`: the primitives of the records' Kafka format, and where a key is placed.
"""
