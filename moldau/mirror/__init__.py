"""Geo-replication between clusters, on MirrorMaker 2's model and with its names.

What this package holds so far. The pure core:

- `records`: MirrorMaker 2's internal record formats (offset syncs, checkpoints, heartbeats), byte for byte.
- `policy`: replication policies, which name remote topics and MirrorMaker 2's internal topics.
- `offset_syncs`: when the mirror source writes an offset sync, and how a consumer group's upstream offset
  is translated to the target through those syncs without ever running ahead.
- `filters`: which topics, groups and topic configs a flow replicates (`topics`, `topics.exclude`...).
- `config`: MirrorMaker 2's dedicated-mode properties (`clusters`, `a.bootstrap.servers`, `a->b.enabled`...)
  turned into each flow's Connect worker and connector configs.

MirrorMaker 2's three connectors, plugins of Moldau's Connect runtime (Kafka's class names are aliases):

- `source`: MirrorSourceConnector, which copies topics into `<alias>.<topic>` and writes offset syncs.
- `checkpoint`: MirrorCheckpointConnector, which translates consumer group offsets into checkpoints and,
  optionally, commits them to the target's idle groups; `sync_reader` feeds it the offset syncs.
- `heartbeat`: MirrorHeartbeatConnector.
- `clients` and `topics`: the two clusters' client settings and remote topic management they share.
"""
