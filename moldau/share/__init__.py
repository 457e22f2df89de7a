"""Share groups (KIP-932): queue-like consumption of a topic by many consumers at once.

- `partition`: the sans-I/O state machine of one share-partition (start/end offsets, in-flight records, their
  states, delivery counts and acquisition locks);
- `group`: share group membership (ShareGroupHeartbeat) with server-side assignment, sans-I/O;
- `sessions`: share sessions (ShareFetch's session id and epoch), sans-I/O;
- `settings`: the broker configs they follow;
- `manager`: the broker's share-partitions, groups and sessions, with the clock and ShareFetch's waiting.

Share-partition state is durable in `__share_group_state`, kept by the share coordinator
(`moldau.coordinator.share`); groups and their members in `__consumer_offsets`, written by the group coordinator
(`moldau.server.share_group_records`); share sessions are in memory.
"""
