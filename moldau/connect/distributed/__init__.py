"""Kafka Connect's distributed mode: workers sharing one group (`group.id`) keep connector configs, source offsets
and statuses in Kafka topics, agree on who runs which connector and task through the group protocol `connect`
(with KIP-415's incremental cooperative assignor), and forward config changes to the group's leader.

- `protocol`: the Connect group protocol's member metadata and assignments, in Kafka's binary layout.
- `assignor`: the leader's incremental cooperative assignor, pure (no I/O, the clock passed in).
- `kafka_log`: a compacted topic read to its end (Kafka's KafkaBasedLog).
- `kafka_stores`: the config, offset and status stores on those logs, with Kafka's keys and JSON values.
- `request_signing`: KIP-507's session keys and signed requests between workers (`connect.protocol=sessioned`),
  pure.
- `forwarding`: requests from one worker to another's REST API (http or https).
- `member`: the worker's group membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) on Moldau's client.
- `herder`: the distributed herder, running what the assignment gives this worker.
- `worker`: `moldau connect distributed`, the process.
"""
