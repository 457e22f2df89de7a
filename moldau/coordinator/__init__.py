"""Coordinators: brokers that own state keyed by an id, placed on the partitions of an internal compacted topic,
so whichever broker leads the partition coordinates the id.

- `moldau.coordinator.group`: consumer groups (classic and KIP-848) and their committed offsets, in
  `__consumer_offsets`;
- `moldau.coordinator.txn`: transactional ids, their producer epochs and open transactions, in
  `__transaction_state`;
- `internal_topic.py` and `record_codec.py`: what both share to create, append to and read their topics.
"""
