"""The controller: validates metadata changes and turns them into records.

Every change follows one path: validate against the current image, emit records, propose them to the metadata
quorum as one atomic entry, and return once the entry is committed and applied here (the quorum then tells the
listeners, such as the replica manager). Errors come back as Kafka error codes per item, the way the admin APIs
report them.

Only the active controller (the quorum's leader) runs these operations. They are serialized by one lock: each
validates against an image that includes every earlier operation, because that one was committed before the
lock was released. Metadata changes are rare, so this costs nothing and rules out two concurrent requests both
creating a topic of the same name.

Broker liveness lives here too: brokers register and heartbeat; one silent for `broker.session.timeout.ms` is
fenced and its partitions get new leaders from their ISR (`leader_election`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from moldau.config import NOT_YET_ACTED_ON, ConfigError, validate_topic_configs
from moldau.metadata import broker_heartbeats, features, log_dirs, reassignment
from moldau.metadata.broker_heartbeats import BrokerHeartbeats, HeartbeatDecision
from moldau.metadata.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage
from moldau.metadata.leader_election import (
    imbalanced_brokers,
    preferred_leader_change,
    preferred_leader_changes,
    unclean_leader_changes,
)
from moldau.metadata.placement import place_replicas
from moldau.metadata.quorum import MetadataQuorum
from moldau.metadata.records import (
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    DelegationTokenRecord,
    Endpoint,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security import delegation_tokens
from moldau.security.acl.admin import acl_creations, acl_deletions
from moldau.security.acl.model import AclBinding, AclBindingFilter
from moldau.security.delegation_tokens import TOKENS_OFF, TokenSettings
from moldau.security.principal import KafkaPrincipal
from moldau.security.quota_admin import Ops, RawEntity, quota_changes
from moldau.security.sasl.scram import MECHANISM_NAMES
from moldau.security.sasl.scram_admin import Deletion, Upsertion, UserResult, scram_changes
from moldau.telemetry.configs import RESOURCE_CLIENT_METRICS, check_client_metrics_configs
from moldau.text import ascii_digits

log = logging.getLogger(__name__)

MAX_TOPIC_NAME_LENGTH = 249
MAX_PARTITIONS_PER_TOPIC = 100_000
# Kafka's controller refuses a CreateTopics request that would create more partitions than this, all its topics
# with POLICY_VIOLATION; Moldau applies the same bound to the partitions a CreatePartitions request adds. Every new
# partition is a log opened on the node's event loop when the records commit, so the bound also bounds how long one
# request can hold that loop.
MAX_PARTITIONS_PER_REQUEST = 10_000
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
PRODUCER_ID_BLOCK_SIZE = 1000
VOTER_CHANGE_TIMEOUT_S = 10.0
_LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")

# IncrementalAlterConfigs operations.
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_LIST_CONFIGS = frozenset({"cleanup.policy", "log.cleanup.policy"})

# The value a config has when nothing overrides it: (resource type, config name) -> value.
DefaultLookup = Callable[[int, str], str | None]


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)


def validate_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, f"topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"topic name is {len(name)} characters long; the maximum is {MAX_TOPIC_NAME_LENGTH}",
        )
    if not _LEGAL_TOPIC_NAME.match(name):
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"topic name {name!r} contains characters other than ASCII letters, digits, '.', '_' and '-'",
        )


class Controller:
    def __init__(self, quorum: MetadataQuorum, node_id: int,
                 default_partitions: int = 1, default_replication_factor: int = 1,
                 config_default: DefaultLookup = lambda resource_type, name: None,
                 session_timeout_ms: int = 9000, rng: random.Random | None = None,
                 group_config_check: Callable[[Mapping[str, str]], None] = lambda configs: None,
                 bootstrap_scram: Sequence[UserScramCredentialRecord] = (),
                 token_settings: TokenSettings = TOKENS_OFF) -> None:
        """`group_config_check`: raises ConfigError for group configs out of what the broker configs allow.
        `bootstrap_scram`: SCRAM credentials written with the log's first broker registration (`--add-scram`).
        `token_settings`: the delegation token configs (tokens are off without a secret key)."""
        self._bootstrap_scram = tuple(bootstrap_scram)
        self.token_settings = token_settings
        self._quorum = quorum
        self._config_default = config_default
        self._group_config_check = group_config_check
        self.node_id = node_id
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.heartbeats = BrokerHeartbeats(session_timeout_ms)
        self._rng = rng or random.Random()
        self._lock = asyncio.Lock()

    @property
    def image(self) -> MetadataImage:
        return self._quorum.image

    async def _commit(self, records: Sequence[MetadataRecord]) -> int:
        """Commit records as one entry; returns its offset. Callers hold the lock."""
        if not records:
            return self._quorum.applied_offset - 1
        return await self._quorum.propose(records)

    def _check_active(self) -> None:
        if not self._quorum.is_active_controller():
            raise KafkaError(ErrorCode.not_controller, "this node is not the active controller")

    def on_leadership_change(self) -> None:
        """A newly active controller gives every broker a full session before fencing anyone."""
        self.heartbeats.reset(self._quorum.clock_ms(), self.image.live_brokers())

    # -- brokers ---------------------------------------------------------------------------------------------

    async def register_broker(self, broker_id: int, incarnation_id: uuid.UUID, endpoints: tuple[Endpoint, ...],
                              rack: str | None, online_log_dirs: Sequence[str] = (),
                              previous_broker_epoch: int = -1) -> int:
        """Register (a new incarnation of) a broker, fenced until it has caught up; returns its broker epoch.

        `online_log_dirs`: the directory.ids of its usable log directories (KIP-858); replicas assigned to any
        other directory of the broker are offline. `previous_broker_epoch` (KIP-966): the epoch under which the
        broker last closed its logs cleanly, -1 if it did not; when it is the registration being replaced, the
        broker keeps the leaderships nobody else could take instead of giving them up and being elected again."""
        async with self._lock:
            self._check_active()
            current = self.image.brokers.get(broker_id)
            now_ms = self._quorum.clock_ms()
            if current is not None and current.incarnation_id == incarnation_id:
                return current.broker_epoch  # a retried registration: same answer
            if current is not None and not current.fenced and not self._session_expired(broker_id, now_ms):
                raise KafkaError(ErrorCode.duplicate_broker_registration,
                                 f"broker {broker_id} is registered by another live process")
            stopped_cleanly = current is not None and previous_broker_epoch == current.broker_epoch
            records: list[MetadataRecord] = broker_heartbeats.fence(self.image, broker_id, self._allow_unclean,
                                                                    stopped_cleanly=stopped_cleanly)
            # The first registration also pins the feature levels in the log (Kafka's bootstrap records), so a
            # later release with newer defaults does not change a running cluster's levels by itself.
            records += [FeatureLevelRecord(name, level) for name, level in features.bootstrap(self.image.features)]
            records += self._scram_bootstrap()
            epoch = self._quorum.next_offset()
            records.append(RegisterBrokerRecord(broker_id, incarnation_id, endpoints, rack, broker_epoch=epoch,
                                                fenced=True, log_dirs=tuple(online_log_dirs)))
            await self._commit(records)
            self.heartbeats.touch(broker_id, now_ms)
            return epoch

    def _scram_bootstrap(self) -> list[MetadataRecord]:
        """The `--add-scram` credentials, with a log's first registration only (Kafka writes them once, at format
        time): a user deleted later must not come back when a node restarts with the same arguments."""
        if self.image.brokers or not self._bootstrap_scram:
            return []
        seeded = [r for r in self._bootstrap_scram if (r.name, r.mechanism) not in self.image.scram_credentials]
        log.info("writing the SCRAM credentials of %s into the new metadata log",
                 ", ".join(sorted({f"{r.name} ({MECHANISM_NAMES[r.mechanism]})" for r in seeded})))
        return list(seeded)

    def _allow_unclean(self, topic: str) -> bool:
        """unclean.leader.election.enable of a topic: its own config, else the broker default."""
        value = self.image.topic_configs(topic).get("unclean.leader.election.enable")
        if value is None:
            value = self._config_default(RESOURCE_TOPIC, "unclean.leader.election.enable")
        return str(value).lower() == "true"

    def _session_expired(self, broker_id: int, now_ms: int) -> bool:
        last = self.heartbeats.last_contact_ms(broker_id)
        return last is None or now_ms - last > self.heartbeats.session_timeout_ms

    async def broker_heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                               want_shutdown: bool, offline_log_dirs: Sequence[str] = ()) -> HeartbeatDecision:
        async with self._lock:
            self._check_active()
            decision = broker_heartbeats.decide(self.image, broker_id, broker_epoch, metadata_offset, want_fence,
                                                want_shutdown, self._allow_unclean, offline_log_dirs)
            if any(isinstance(r, BrokerRegistrationChangeRecord) for r in decision.records):
                log.warning("broker %d reports log directories %s offline: moving their replicas' leadership "
                            "away", broker_id, sorted(offline_log_dirs))
            if decision.error is None:
                self.heartbeats.touch(broker_id, self._quorum.clock_ms())
            await self._commit(decision.records)
            return decision

    async def fence_expired_brokers(self) -> list[int]:
        """Fence every live broker silent for longer than the session timeout; returns their ids."""
        async with self._lock:
            self._check_active()
            expired = self.heartbeats.expired(self._quorum.clock_ms(), self.image.live_brokers())
            fenced = []
            for broker_id in expired:
                records = broker_heartbeats.fence(self.image, broker_id, self._allow_unclean)
                if records:
                    log.warning("fencing broker %d: no heartbeat for %d ms", broker_id,
                                self.heartbeats.session_timeout_ms)
                    await self._commit(records)
                    fenced.append(broker_id)
            return fenced

    async def assign_replicas_to_dirs(self, broker_id: int, broker_epoch: int,
                                      assignments: Sequence[log_dirs.Assignment]
                                      ) -> dict[tuple[uuid.UUID, int], ErrorCode]:
        """AssignReplicasToDirs: record which log directory holds each of the broker's replicas; returns each
        assignment's outcome. Raises KafkaError STALE_BROKER_EPOCH for another incarnation."""
        async with self._lock:
            self._check_active()
            registration = self.image.brokers.get(broker_id)
            if registration is None or registration.broker_epoch != broker_epoch:
                raise KafkaError(ErrorCode.stale_broker_epoch,
                                 f"broker {broker_id} epoch {broker_epoch} is not current")
            records, outcomes = log_dirs.assignment_changes(self.image, broker_id, assignments, self._allow_unclean)
            await self._commit(records)
            return outcomes

    # -- partitions: ISR changes from leaders -----------------------------------------------------------------

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic_id: uuid.UUID, partition: int,
                              leader_epoch: int, partition_epoch: int, isr: tuple[int, ...],
                              member_epochs: tuple[int, ...] | None = None) -> PartitionImage:
        """A leader's ISR change (AlterPartition): validated against the partition as committed, then committed.
        `member_epochs` (v3, KIP-903) gives each ISR member's broker epoch as the leader saw it fetch, -1 for
        unchecked.

        Returns the partition as it now is. Raises KafkaError: STALE_BROKER_EPOCH, UNKNOWN_TOPIC_ID,
        UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (the sender does not lead it), FENCED_LEADER_EPOCH,
        INVALID_UPDATE_VERSION (the sender's view is older than the committed one), INELIGIBLE_REPLICA (a new
        member that is not a live replica, or whose broker has registered again since the fetch the leader
        judged it by), INVALID_REQUEST (an ISR without its leader).
        """
        async with self._lock:
            self._check_active()
            current = self._partition_for_change(broker_id, broker_epoch, topic_id, partition, leader_epoch)
            if partition_epoch != current.partition_epoch:
                raise KafkaError(ErrorCode.invalid_update_version,
                                 f"partition epoch {partition_epoch} is not the current {current.partition_epoch}")
            _check_isr(current, isr, self.image)
            _check_member_epochs(isr, member_epochs, self.image)
            if isr == current.isr:
                return current
            change = PartitionRecord(topic_id, partition, current.replicas, isr, current.leader,
                                     current.leader_epoch, current.partition_epoch + 1, current.adding_replicas,
                                     current.removing_replicas)
            # A reassignment completes with the ISR change that brings its last target replica in sync.
            await self._commit([reassignment.complete_if_in_sync(change, self.image.is_live)])
            return self.image.topics_by_id[topic_id].partitions[partition]

    def _partition_for_change(self, broker_id: int, broker_epoch: int, topic_id: uuid.UUID, partition: int,
                              leader_epoch: int) -> PartitionImage:
        registration = self.image.brokers.get(broker_id)
        if registration is None or registration.broker_epoch != broker_epoch:
            raise KafkaError(ErrorCode.stale_broker_epoch, f"broker {broker_id} epoch {broker_epoch} is not current")
        topic = self.image.topics_by_id.get(topic_id)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_id, f"no topic with id {topic_id}")
        current = topic.partitions.get(partition)
        if current is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic.name} has no partition {partition}")
        if current.leader != broker_id:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"broker {broker_id} does not lead "
                             f"{topic.name}-{partition} (broker {current.leader} does)")
        if leader_epoch != current.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch,
                             f"leader epoch {leader_epoch} is not the current {current.leader_epoch}")
        return current

    # -- leader elections ------------------------------------------------------------------------------------

    async def elect_leaders(self, unclean: bool, partitions: Sequence[tuple[str, int]] | None
                            ) -> dict[tuple[str, int], KafkaError | None]:
        """ElectLeaders: preferred (the first replica, if in the ISR and live) or unclean (any live replica of a
        leaderless partition). Returns each named partition's outcome (None: elected); for `partitions=None`
        (all), only the partitions that changed or failed."""
        async with self._lock:
            self._check_active()
            wanted = partitions if partitions is not None else [
                (t.name, p) for t in self.image.topics_by_id.values() for p in t.partitions]
            outcomes: dict[tuple[str, int], KafkaError | None] = {}
            records: list[MetadataRecord] = []
            for name, index in wanted:
                try:
                    records += self._elect_one(name, index, unclean)
                    outcomes[(name, index)] = None
                except KafkaError as exc:
                    if partitions is not None or exc.code != ErrorCode.election_not_needed:
                        outcomes[(name, index)] = exc
            await self._commit(records)
            return outcomes

    def _partition_named(self, name: str, index: int) -> tuple[TopicImage, PartitionImage]:
        """The topic and partition; raises KafkaError UNKNOWN_TOPIC_OR_PARTITION."""
        topic = self.image.topics_by_name.get(name)
        partition = topic.partitions.get(index) if topic is not None else None
        if topic is None or partition is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no partition {name}-{index}")
        return topic, partition

    def _elect_one(self, name: str, index: int, unclean: bool) -> list[PartitionRecord]:
        topic, partition = self._partition_named(name, index)
        if unclean:
            if partition.leader != NO_LEADER:
                raise KafkaError(ErrorCode.election_not_needed, f"{name}-{index} has a leader")
            changes = unclean_leader_changes(self.image, topic.topic_id, partition)
            if not changes:
                raise KafkaError(ErrorCode.eligible_leaders_not_available, f"no live replica of {name}-{index}")
            return changes
        preferred = partition.replicas[0]
        if partition.leader == preferred:
            raise KafkaError(ErrorCode.election_not_needed, f"broker {preferred} already leads {name}-{index}")
        changes = preferred_leader_change(self.image, topic.topic_id, partition)
        if not changes:
            raise KafkaError(ErrorCode.preferred_leader_not_available,
                             f"the preferred leader {preferred} of {name}-{index} is not live and in the ISR")
        return changes

    async def rebalance_leaders(self, max_imbalance_percent: int) -> int:
        """Move leadership back to preferred replicas on brokers that lead too little; returns how many moved."""
        async with self._lock:
            self._check_active()
            brokers = imbalanced_brokers(self.image, max_imbalance_percent)
            if not brokers:
                return 0
            changes = [c for c in preferred_leader_changes(self.image) if c.leader in brokers]
            if changes:
                log.info("moving %d leaderships back to their preferred replicas on brokers %s", len(changes),
                         sorted(brokers))
            await self._commit(changes)
            return len(changes)

    # -- topics ----------------------------------------------------------------------------------------------

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignments: Mapping[int, Sequence[int]], configs: Mapping[str, str],
                           validate_only: bool = False) -> CreatedTopic:
        async with self._lock:
            self._check_active()
            return await self._create_topic(name, num_partitions, replication_factor, assignments, configs,
                                            validate_only)

    async def _create_topic(self, name: str, num_partitions: int, replication_factor: int,
                            assignments: Mapping[int, Sequence[int]], configs: Mapping[str, str],
                            validate_only: bool) -> CreatedTopic:
        validate_topic_name(name)
        if name in self.image.topics_by_name:
            raise KafkaError(ErrorCode.topic_already_exists, f"topic '{name}' already exists")
        self._check_collision(name)
        _check_configs(configs)
        placement = self._placement(num_partitions, replication_factor, assignments)
        topic_id = uuid.uuid4()
        created = CreatedTopic(topic_id, len(placement), len(placement[0]), dict(configs))
        if validate_only:
            return created
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        records += [ConfigRecord(RESOURCE_TOPIC, name, k, v) for k, v in configs.items()]
        records += [_new_partition(self.image, topic_id, p, replicas) for p, replicas in enumerate(placement)]
        await self._commit(records)
        return created

    def _check_collision(self, name: str) -> None:
        # '.' and '_' collide in metric names, so Kafka refuses topics that differ only in them.
        folded = name.replace(".", "_")
        for existing in self.image.topics_by_name:
            if existing.replace(".", "_") == folded:
                raise KafkaError(
                    ErrorCode.invalid_topic_exception,
                    f"topic '{name}' collides with existing topic '{existing}' ('.' and '_' are equivalent)",
                )

    def _placement(self, num_partitions: int, replication_factor: int,
                   assignments: Mapping[int, Sequence[int]]) -> list[tuple[int, ...]]:
        if assignments:
            if num_partitions not in (-1, len(assignments)) or replication_factor != -1:
                raise KafkaError(ErrorCode.invalid_request,
                                 "give either replica assignments or partition count and replication factor")
            registered = sorted(self.image.brokers)
            return [self._check_assignment(p, assignments[p], registered) for p in range(len(assignments))]
        partitions = self.default_partitions if num_partitions == -1 else num_partitions
        factor = self.default_replication_factor if replication_factor == -1 else replication_factor
        if partitions > MAX_PARTITIONS_PER_TOPIC:
            raise KafkaError(ErrorCode.invalid_partitions,
                             f"number of partitions must be between 1 and {MAX_PARTITIONS_PER_TOPIC}")
        return place_replicas(partitions, factor, self._placeable_brokers(), self._rng)

    def _placeable_brokers(self) -> list[tuple[int, str | None]]:
        """Unfenced brokers, with their racks: new replicas go only where a broker is alive to host them."""
        brokers = self.image.brokers
        return [(b, brokers[b].rack) for b in self.image.live_brokers()]

    @staticmethod
    def _check_assignment(partition: int, replicas: Sequence[int], brokers: list[int]) -> tuple[int, ...]:
        if not replicas or len(set(replicas)) != len(replicas):
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"partition {partition} needs a non-empty list of distinct brokers")
        unknown = [b for b in replicas if b not in brokers]
        if unknown:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"partition {partition} names unknown brokers {unknown}")
        return tuple(replicas)

    async def delete_topic(self, topic: TopicImage) -> None:
        async with self._lock:
            self._check_active()
            if topic.topic_id in self.image.topics_by_id:
                await self._commit([RemoveTopicRecord(topic.topic_id)])

    async def create_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None,
                                validate_only: bool = False) -> None:
        async with self._lock:
            self._check_active()
            await self._create_partitions(name, count, assignments, validate_only)

    async def _create_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None,
                                 validate_only: bool) -> None:
        topic = self.image.topics_by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
        current = len(topic.partitions)
        if count <= current:
            raise KafkaError(ErrorCode.invalid_partitions,
                             f"topic '{name}' has {current} partitions; the new count must be larger")
        if count > MAX_PARTITIONS_PER_TOPIC:
            raise KafkaError(ErrorCode.invalid_partitions, f"at most {MAX_PARTITIONS_PER_TOPIC} partitions")
        factor = len(topic.partitions[0].target_replicas)  # not counting replicas a reassignment removes
        if assignments is not None:
            if len(assignments) != count - current:
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"{count - current} new partitions need as many assignments")
            registered = sorted(self.image.brokers)
            placement = [self._check_assignment(current + i, a, registered) for i, a in enumerate(assignments)]
        else:
            placement = place_replicas(count - current, factor, self._placeable_brokers(), self._rng, current)
        if not validate_only:
            await self._commit([_new_partition(self.image, topic.topic_id, current + i, r)
                                for i, r in enumerate(placement)])

    # -- configs ---------------------------------------------------------------------------------------------

    async def alter_configs(self, resource_type: int, resource_name: str,
                            changes: Sequence[tuple[str, int, str | None]], validate_only: bool = False,
                            replace_all: bool = False) -> None:
        """Apply (name, operation, value) changes; `replace_all` is the legacy AlterConfigs semantics."""
        async with self._lock:
            self._check_active()
            await self._alter_configs(resource_type, resource_name, changes, validate_only, replace_all)

    async def _alter_configs(self, resource_type: int, resource_name: str,
                             changes: Sequence[tuple[str, int, str | None]], validate_only: bool,
                             replace_all: bool) -> None:
        current = self._current_configs(resource_type, resource_name)
        updated = {} if replace_all else dict(current)
        for name, op, value in changes:
            if op in (OP_APPEND, OP_SUBTRACT) and name not in updated:
                # Kafka appends to (or subtracts from) the value in effect, which may be the default.
                default = self._config_default(resource_type, name)
                if default is not None:
                    updated[name] = default
            _apply_op(updated, name, op, value)
        if resource_type == RESOURCE_TOPIC:
            _check_configs(updated)
        elif resource_type == RESOURCE_CLIENT_METRICS:
            check_client_metrics_configs(resource_name, updated)
        elif resource_type == RESOURCE_GROUP:
            self._check_group_configs(updated)
        else:
            _check_broker_configs(updated)
            for name in sorted(NOT_YET_ACTED_ON & {n for n, op, _ in changes if op != OP_DELETE}):
                log.warning("broker config %s is stored but has no effect", name)
        if validate_only:
            return
        records: list[MetadataRecord] = [
            ConfigRecord(resource_type, resource_name, k, v) for k, v in updated.items() if current.get(k) != v
        ]
        records += [ConfigRecord(resource_type, resource_name, k, None) for k in current if k not in updated]
        await self._commit(records)

    def _current_configs(self, resource_type: int, resource_name: str) -> Mapping[str, str]:
        if resource_type == RESOURCE_TOPIC:
            if resource_name not in self.image.topics_by_name:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic '{resource_name}' does not exist")
            return self.image.topic_configs(resource_name)
        if resource_type == RESOURCE_BROKER:
            if resource_name not in ("", str(self.node_id)) and not (
                ascii_digits(resource_name) and int(resource_name) in self.image.brokers
            ):
                raise KafkaError(ErrorCode.invalid_request, f"unknown broker '{resource_name}'")
            return self.image.configs.get((RESOURCE_BROKER, resource_name), {})
        if resource_type == RESOURCE_CLIENT_METRICS:
            if not resource_name:
                raise KafkaError(ErrorCode.invalid_request, "a client metrics subscription needs a name")
            return self.image.configs.get((RESOURCE_CLIENT_METRICS, resource_name), {})
        if resource_type == RESOURCE_GROUP:
            # A group's configs may be set before the group exists, as in Kafka.
            if not resource_name:
                raise KafkaError(ErrorCode.invalid_request, "a group config resource needs a group id")
            return self.image.group_configs(resource_name)
        raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {resource_type}")

    def _check_group_configs(self, configs: Mapping[str, str]) -> None:
        try:
            self._group_config_check(configs)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from exc

    # -- client quotas ---------------------------------------------------------------------------------------

    async def alter_client_quotas(self, entries: Sequence[tuple[RawEntity, Ops]],
                                  validate_only: bool = False) -> list[KafkaError | None]:
        """Set (value) or remove (None) quotas of entities (KIP-546); one error or None per entry
        (`moldau.security.quota_admin`). The accepted entries are committed in one entry of the metadata log."""
        async with self._lock:
            self._check_active()
            records, results = quota_changes(self.image, entries)
            if not validate_only:
                await self._commit(records)
            return results

    # -- SCRAM credentials -----------------------------------------------------------------------------------

    async def alter_user_scram_credentials(self, deletions: Sequence[Deletion],
                                           upsertions: Sequence[Upsertion]) -> list[UserResult]:
        """KIP-554: one result per user; the users whose changes are all valid are committed together."""
        async with self._lock:
            self._check_active()
            records, results = scram_changes(self.image, deletions, upsertions)
            await self._commit(records)
            return results

    # -- delegation tokens (KIP-48) --------------------------------------------------------------------------

    async def create_delegation_token(self, now_ms: int, owner: KafkaPrincipal, requester: KafkaPrincipal,
                                      renewers: Sequence[KafkaPrincipal],
                                      max_lifetime_ms: int) -> DelegationTokenRecord:
        """Issue a token; raises KafkaError (DELEGATION_TOKEN_AUTH_DISABLED, INVALID_PRINCIPAL_TYPE)."""
        async with self._lock:
            self._check_active()
            token_id = delegation_tokens.new_token_id(self._rng.randbytes(16))
            while token_id in self.image.delegation_tokens:
                token_id = delegation_tokens.new_token_id(self._rng.randbytes(16))
            record = delegation_tokens.create(self.token_settings, now_ms, token_id, owner, requester, renewers,
                                              max_lifetime_ms)
            await self._commit([record])
            return record

    async def renew_delegation_token(self, now_ms: int, hmac: bytes, principal: KafkaPrincipal,
                                     renew_period_ms: int) -> int:
        """The token's new expiry time; raises KafkaError (not found, expired, owner mismatch)."""
        async with self._lock:
            self._check_active()
            secret = self.token_settings.check_enabled()
            token = delegation_tokens.find_by_hmac(self.image.delegation_tokens.values(), secret, hmac)
            renewed = delegation_tokens.renew(self.token_settings, now_ms, token, principal, renew_period_ms)
            await self._commit([renewed])
            return renewed.expiry_timestamp

    async def expire_delegation_token(self, now_ms: int, hmac: bytes, principal: KafkaPrincipal,
                                      expiry_period_ms: int) -> int:
        """The token's new expiry time (now when it is deleted at once); raises KafkaError."""
        async with self._lock:
            self._check_active()
            secret = self.token_settings.check_enabled()
            token = delegation_tokens.find_by_hmac(self.image.delegation_tokens.values(), secret, hmac)
            change = delegation_tokens.expire(now_ms, token, principal, expiry_period_ms)
            await self._commit([change])
            return change.expiry_timestamp if isinstance(change, DelegationTokenRecord) else now_ms

    async def remove_expired_delegation_tokens(self, now_ms: int) -> int:
        """Delete the tokens past their expiry, in one entry; how many."""
        async with self._lock:
            self._check_active()
            removals = delegation_tokens.expired(self.image.delegation_tokens.values(), now_ms)
            if removals:
                await self._commit(removals)
            return len(removals)

    # -- features --------------------------------------------------------------------------------------------

    async def update_features(self, updates: Sequence[tuple[str, int, int]], validate_only: bool) -> None:
        """Finalize feature levels (KIP-584): (name, level, upgrade type) each. All or nothing: the first invalid
        update raises INVALID_UPDATE_VERSION and nothing is committed."""
        async with self._lock:
            self._check_active()
            if len({name for name, _, _ in updates}) != len(updates):
                raise KafkaError(ErrorCode.invalid_request, "a feature is named more than once")
            current = self.image.features
            for name, level, upgrade_type in updates:
                features.check_update(current, name, level, upgrade_type)
            if validate_only:
                return
            if any(name == features.KRAFT_VERSION and level >= 1 for name, level, _ in updates):
                # kraft.version 1 is the voter set in the log (KIP-853): write it before recording the level.
                await self._quorum.enable_dynamic_voters(VOTER_CHANGE_TIMEOUT_S)
            await self._commit([FeatureLevelRecord(name, level) for name, level, _ in updates])

    # -- brokers leaving ---------------------------------------------------------------------------------------

    async def unregister_broker(self, broker_id: int) -> None:
        """Drop a broker's registration (UnregisterBroker, KIP-631), for a broker that is gone for good. A live
        (unfenced) broker is refused: it would register again at its next heartbeat."""
        async with self._lock:
            self._check_active()
            registration = self.image.brokers.get(broker_id)
            if registration is None:
                raise KafkaError(ErrorCode.broker_id_not_registered, f"broker {broker_id} is not registered")
            if not registration.fenced:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"broker {broker_id} is active; shut it down before unregistering it")
            await self._commit([UnregisterBrokerRecord(broker_id, registration.broker_epoch)])

    # -- reassignments ---------------------------------------------------------------------------------------

    async def alter_partition_reassignments(
        self, changes: Sequence[tuple[str, int, Sequence[int] | None]],
    ) -> list[KafkaError | None]:
        """Start (target replicas) or cancel (None) reassignments of (topic, partition); one error or None per item.

        Every accepted change is committed in one entry. Errors: UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_REPLICA_ASSIGNMENT (an empty target, repeated or unregistered brokers, or no replica left in sync),
        NO_REASSIGNMENT_IN_PROGRESS (a cancel with nothing to cancel), INVALID_REQUEST (a partition named twice).
        Raises KafkaError NOT_CONTROLLER.
        """
        async with self._lock:
            self._check_active()
            results: list[KafkaError | None] = []
            records: list[MetadataRecord] = []
            seen: set[tuple[str, int]] = set()
            for name, partition, target in changes:
                try:
                    if (name, partition) in seen:
                        raise KafkaError(ErrorCode.invalid_request, f"{name}-{partition} is named twice")
                    seen.add((name, partition))
                    record = self._reassignment_change(name, partition, target)
                except KafkaError as exc:
                    results.append(exc)
                    continue
                if record is not None:
                    records.append(record)
                results.append(None)
            await self._commit(records)
            return results

    def _reassignment_change(self, name: str, partition: int, target: Sequence[int] | None) -> PartitionRecord | None:
        topic, current = self._partition_named(name, partition)
        if target is None:
            return reassignment.cancel(topic.topic_id, current, self.image.is_live)
        self._check_assignment(partition, target, sorted(self.image.brokers))
        return reassignment.start(topic.topic_id, current, target, self.image.is_live)

    def list_partition_reassignments(
        self, topics: Mapping[str, Sequence[int]] | None = None,
    ) -> list[tuple[str, PartitionImage]]:
        """Partitions being reassigned, by topic name then partition: all of them, or those among `topics` (topic ->
        partitions; unknown ones are left out). Raises KafkaError NOT_CONTROLLER."""
        self._check_active()
        ongoing = []
        for name, topic in sorted(self.image.topics_by_name.items()):
            if topics is not None and name not in topics:
                continue
            wanted = None if topics is None else set(topics[name])
            ongoing += [(name, p) for i, p in sorted(topic.partitions.items())
                        if p.reassigning and (wanted is None or i in wanted)]
        return ongoing

    # -- ACLs ----------------------------------------------------------------------------------------------------

    async def create_acls(self, acls: Sequence[AclBinding]) -> list[KafkaError | None]:
        """Store ACLs (one entry for all valid ones); per ACL None or the error that refused it
        (`moldau.security.acl.admin`)."""
        async with self._lock:
            self._check_active()
            records, results = acl_creations(self.image, acls, lambda: uuid.UUID(int=self._rng.getrandbits(128)))
            await self._commit(records)
            return results

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding] | KafkaError]:
        """Remove the ACLs each filter matches (one entry for all); per filter the ACLs it removed, or the error
        that refused the filter."""
        async with self._lock:
            self._check_active()
            records, results = acl_deletions(self.image, filters)
            await self._commit(records)
            return results

    # -- producer ids ----------------------------------------------------------------------------------------

    async def allocate_producer_ids(self, broker_id: int, count: int = PRODUCER_ID_BLOCK_SIZE) -> int:
        """Reserve a block of producer ids durably; returns the first id of the block."""
        async with self._lock:
            self._check_active()
            first = self.image.next_producer_id
            await self._commit([ProducerIdsRecord(broker_id, first + count)])
            return first


def _new_partition(image: MetadataImage, topic_id: uuid.UUID, partition: int,
                   replicas: tuple[int, ...]) -> PartitionRecord:
    # Every replica starts in sync (they all have the empty log); one that never fetches is dropped by the leader
    # after replica.lag.time.max.ms, as in Kafka.
    return PartitionRecord(topic_id, partition, replicas, isr=replicas, leader=replicas[0],
                           leader_epoch=0, partition_epoch=0, directories=_default_directories(image, replicas))


def _default_directories(image: MetadataImage, replicas: tuple[int, ...]) -> tuple[str, ...]:
    """KIP-858, as Kafka's controller assigns a new replica: to its broker's log directory when the broker registered
    exactly one, so that the broker need not send AssignReplicasToDirs for every new partition; "" (the broker says
    where, AssignReplicasToDirs) when it has several. () when no replica is assigned."""
    directories = []
    for broker_id in replicas:
        registration = image.brokers.get(broker_id)
        registered = registration.log_dirs if registration is not None else ()
        directories.append(registered[0] if len(registered) == 1 else "")
    return tuple(directories) if any(directories) else ()


def _check_isr(current: PartitionImage, isr: tuple[int, ...], image: MetadataImage) -> None:
    if current.leader not in isr or len(set(isr)) != len(isr):
        raise KafkaError(ErrorCode.invalid_request, f"ISR {list(isr)} must hold the leader {current.leader} once")
    for broker in isr:
        if broker not in current.replicas:
            raise KafkaError(ErrorCode.ineligible_replica, f"broker {broker} is not a replica")
        if broker not in current.isr and not image.replica_online(broker, current):
            # A fenced broker (down, or shutting down), or a replica in an offline log directory, must not join:
            # it could not take over as leader.
            raise KafkaError(ErrorCode.ineligible_replica, f"broker {broker} is fenced or its replica is in an "
                             "offline log directory, and cannot join the ISR")


UNCHECKED_EPOCH = -1  # an ISR member's broker epoch in AlterPartition that asks for no check


def _check_member_epochs(isr: tuple[int, ...], member_epochs: tuple[int, ...] | None, image: MetadataImage) -> None:
    """A member whose broker registered again since the leader saw it fetch (it restarted, and may have lost
    the unflushed tail it was judged by) must not join on the strength of that fetch (KIP-903). Only -1 means
    unchecked, as in Kafka: any other value must be the broker's current epoch."""
    for broker, epoch in zip(isr, member_epochs or (), strict=False):
        registration = image.brokers.get(broker)
        if epoch != UNCHECKED_EPOCH and (registration is None or registration.broker_epoch != epoch):
            raise KafkaError(ErrorCode.ineligible_replica, f"broker {broker} was at epoch {epoch} when its leader "
                             "saw it fetch, and has registered again since")


def _apply_op(configs: dict[str, str], name: str, op: int, value: str | None) -> None:
    if op == OP_SET:
        if value is None:
            raise KafkaError(ErrorCode.invalid_config, f"config '{name}' needs a value")
        configs[name] = value
    elif op == OP_DELETE:
        configs.pop(name, None)
    elif op in (OP_APPEND, OP_SUBTRACT):
        if name not in _LIST_CONFIGS:
            raise KafkaError(ErrorCode.invalid_config, f"config '{name}' is not a list; cannot APPEND/SUBTRACT")
        items = [i for i in configs.get(name, "").split(",") if i]
        for item in (value or "").split(","):
            if op == OP_APPEND and item and item not in items:
                items.append(item)
            elif op == OP_SUBTRACT and item in items:
                items.remove(item)
        configs[name] = ",".join(items)
    else:
        raise KafkaError(ErrorCode.invalid_request, f"unknown config operation {op}")


def _check_configs(configs: Mapping[str, str]) -> None:
    try:
        validate_topic_configs(dict(configs))
    except ConfigError as exc:
        raise KafkaError(ErrorCode.invalid_config, str(exc)) from exc
    for name in sorted(NOT_YET_ACTED_ON & configs.keys()):
        log.warning("topic config %s is accepted but has no effect yet", name)


def _check_broker_configs(configs: Mapping[str, str]) -> None:
    from moldau.config import validate_dynamic_broker_configs

    try:
        validate_dynamic_broker_configs(dict(configs))
    except ConfigError as exc:
        raise KafkaError(ErrorCode.invalid_config, str(exc)) from exc
