"""Geo-replication between clusters, on MirrorMaker 2's model and with its names.

What this package holds so far (the pure core; the connectors and the `moldau mirror` driver build on it):

- `records`: MirrorMaker 2's internal record formats (offset syncs, checkpoints, heartbeats), byte for byte.
- `policy`: replication policies, which name remote topics and MirrorMaker 2's internal topics.
- `offset_syncs`: when the mirror source writes an offset sync, and how a consumer group's upstream offset
  is translated to the target through those syncs without ever running ahead.
"""
