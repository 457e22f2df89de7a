"""The metadata image: an immutable view of cluster metadata, built by replaying metadata records.

Handlers read the current image without locks; a change produces a new image (copy on write of the maps that
changed), so a request sees one consistent image from start to end.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from moldau.metadata.records import (
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from moldau.security.acl.model import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

_EMPTY: Mapping[str, str] = MappingProxyType({})
# A client quota entity: sorted (entity type, name or None for the default) pairs (see ClientQuotaRecord).
QuotaEntity = tuple[tuple[str, str | None], ...]

# A broker's registration as the image holds it: the latest RegisterBrokerRecord with `fenced` kept current by
# fence and unfence records. Keeping the record type means handlers read `.endpoints`, `.rack` and so on as before.
BrokerRegistration = RegisterBrokerRecord
# Kafka's "no leader" in PartitionRecord.leader.
NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionImage:
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # A reassignment in progress (see PartitionRecord): the replicas being added and being removed.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    # The directory.id holding each replica, in `replicas` order ("" not assigned yet); see PartitionRecord.
    directories: tuple[str, ...] = ()

    def directory_of(self, broker_id: int) -> str:
        """The directory.id assigned to the broker's replica; "" if none is (or the broker is no replica)."""
        for replica, directory in zip(self.replicas, self.directories, strict=False):
            if replica == broker_id:
                return directory
        return ""

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas the partition will have once its reassignment completes (its replicas if none is)."""
        return tuple(b for b in self.replicas if b not in self.removing_replicas)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionImage] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = -1  # offset of the last record applied
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: MappingProxyType({}))
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    next_producer_id: int = 0
    # ACLs by id (AccessControlEntryRecord); replaced, never mutated, so the authorizer's index can follow it.
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=lambda: MappingProxyType({}))
    # Client quotas (KIP-546): entity -> quota name -> value.
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=lambda: MappingProxyType({}))
    # SCRAM credentials by (user, mechanism code): the latest UserScramCredentialRecord of each.
    scram_credentials: Mapping[tuple[str, int], UserScramCredentialRecord] = field(
        default_factory=lambda: MappingProxyType({}))
    # Finalized feature levels written by FeatureLevelRecords (KIP-584); a feature not here is at its default
    # (moldau.metadata.features).
    features: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # Delegation tokens (KIP-48) by token id: the latest DelegationTokenRecord of each.
    delegation_tokens: Mapping[str, DelegationTokenRecord] = field(default_factory=lambda: MappingProxyType({}))

    def topic_configs(self, name: str) -> Mapping[str, str]:
        return self.configs.get((RESOURCE_TOPIC, name), _EMPTY)

    def group_configs(self, group_id: str) -> Mapping[str, str]:
        """A group's own configs (GROUP config resources); the same empty mapping for every group without."""
        return self.configs.get((RESOURCE_GROUP, group_id), _EMPTY)

    def broker_configs(self, broker_id: int | None = None) -> Mapping[str, str]:
        # Broker resource name "" holds cluster-wide dynamic defaults, as in Kafka.
        return self.configs.get((RESOURCE_BROKER, "" if broker_id is None else str(broker_id)), _EMPTY)

    def is_live(self, broker_id: int) -> bool:
        """Registered and unfenced: the broker may lead partitions and be in ISRs."""
        registration = self.brokers.get(broker_id)
        return registration is not None and not registration.fenced

    def replica_online(self, broker_id: int, partition: PartitionImage) -> bool:
        """Live, and the directory its replica of `partition` is assigned to is online (KIP-858): a replica with
        no assignment yet, or on a broker that did not list its directories, counts as online."""
        registration = self.brokers.get(broker_id)
        if registration is None or registration.fenced:
            return False
        directory = partition.directory_of(broker_id)
        return not directory or not registration.log_dirs or directory in registration.log_dirs

    def live_brokers(self) -> list[int]:
        return sorted(b for b, registration in self.brokers.items() if not registration.fenced)

    def partitions_of(self, broker_id: int) -> list[tuple[TopicImage, PartitionImage]]:
        """Partitions that list the broker as a replica, in topic name then partition order."""
        return [
            (topic, partition)
            for _, topic in sorted(self.topics_by_name.items())
            for _, partition in sorted(topic.partitions.items())
            if broker_id in partition.replicas
        ]

    def apply(self, records: Iterable[MetadataRecord], last_offset: int) -> MetadataImage:
        builder = _ImageBuilder(self)
        for record in records:
            builder.apply(record)
        return builder.build(last_offset)

    def to_records(self) -> list[MetadataRecord]:
        """Records that rebuild this image when applied to an empty one (at `self.offset`): a metadata snapshot."""
        records: list[MetadataRecord] = [self.brokers[b] for b in sorted(self.brokers)]
        for name, topic in sorted(self.topics_by_name.items()):
            records.append(TopicRecord(name, topic.topic_id))
            records += [_partition_record(topic.topic_id, p) for _, p in sorted(topic.partitions.items())]
        for (resource_type, resource_name), configs in sorted(self.configs.items()):
            records += [ConfigRecord(resource_type, resource_name, k, v) for k, v in sorted(configs.items())]
        for entity, values in sorted(self.client_quotas.items(), key=lambda item: repr(item[0])):
            records += [ClientQuotaRecord(entity, k, v) for k, v in sorted(values.items())]
        records += [self.scram_credentials[key] for key in sorted(self.scram_credentials)]
        if self.next_producer_id:
            # Which broker asked for the last block is not kept; -1 says "from a snapshot".
            records.append(ProducerIdsRecord(-1, self.next_producer_id))
        records += [acl_record(acl_id, acl) for acl_id, acl in self.acls.items()]
        records += [FeatureLevelRecord(name, level) for name, level in sorted(self.features.items())]
        records += [self.delegation_tokens[token_id] for token_id in sorted(self.delegation_tokens)]
        return records


def acl_record(acl_id: uuid.UUID, acl: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(acl_id, acl.resource_type, acl.resource_name, acl.pattern_type, acl.principal,
                                    acl.host, acl.operation, acl.permission)


def _acl_binding(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(ResourceType(record.resource_type), record.resource_name, PatternType(record.pattern_type),
                      record.principal, record.host, AclOperation(record.operation),
                      AclPermissionType(record.permission_type))


def _partition_record(topic_id: uuid.UUID, p: PartitionImage) -> PartitionRecord:
    return PartitionRecord(topic_id, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch,
                           p.adding_replicas, p.removing_replicas, p.directories)


class _ImageBuilder:
    """Accumulates changes to an image, copying each map at most once per batch of records."""

    def __init__(self, base: MetadataImage) -> None:
        self.base = base
        self.topics_by_id: dict[uuid.UUID, TopicImage] | None = None
        self.brokers: dict[int, BrokerRegistration] | None = None
        self.configs: dict[tuple[int, str], Mapping[str, str]] | None = None
        self.next_producer_id = base.next_producer_id
        self.acls: dict[uuid.UUID, AclBinding] | None = None
        self.client_quotas: dict[QuotaEntity, Mapping[str, float]] | None = None
        self.scram_credentials: dict[tuple[str, int], UserScramCredentialRecord] | None = None
        self.features: dict[str, int] | None = None
        self.delegation_tokens: dict[str, DelegationTokenRecord] | None = None
        # Topics whose partition map this batch already copied: the TopicImage made for the batch and its map, which
        # further records of the batch change in place (a 10,000-partition topic is created by 10,000 records).
        self._own_partitions: dict[uuid.UUID, tuple[TopicImage, dict[int, PartitionImage]]] = {}

    def apply(self, record: MetadataRecord) -> None:
        if isinstance(record, TopicRecord):
            self._topics()[record.topic_id] = TopicImage(record.name, record.topic_id)
        elif isinstance(record, PartitionRecord):
            self._apply_partition(record)
        elif isinstance(record, RemoveTopicRecord):
            removed = self._topics().pop(record.topic_id, None)
            if removed is not None:
                self._configs().pop((RESOURCE_TOPIC, removed.name), None)
        elif isinstance(record, ConfigRecord):
            self._apply_config(record)
        elif isinstance(record, RegisterBrokerRecord):
            self._brokers()[record.broker_id] = record
        elif isinstance(record, FenceBrokerRecord | UnfenceBrokerRecord | UnregisterBrokerRecord
                        | BrokerRegistrationChangeRecord):
            self._apply_broker_change(record)
        elif isinstance(record, ProducerIdsRecord):
            self.next_producer_id = max(self.next_producer_id, record.next_producer_id)
        elif isinstance(record, AccessControlEntryRecord):
            self._acls()[record.id] = _acl_binding(record)
        elif isinstance(record, RemoveAccessControlEntryRecord):
            self._acls().pop(record.id, None)
        elif isinstance(record, ClientQuotaRecord):
            self._apply_client_quota(record)
        elif isinstance(record, UserScramCredentialRecord):
            self._scram()[(record.name, record.mechanism)] = record
        elif isinstance(record, RemoveUserScramCredentialRecord):
            self._scram().pop((record.name, record.mechanism), None)
        elif isinstance(record, FeatureLevelRecord):
            if self.features is None:
                self.features = dict(self.base.features)
            self.features[record.name] = record.feature_level  # kept at 0 too: "off" differs from the default
        elif isinstance(record, DelegationTokenRecord):
            self._tokens()[record.token_id] = record
        elif isinstance(record, RemoveDelegationTokenRecord):
            self._tokens().pop(record.token_id, None)

    def _acls(self) -> dict[uuid.UUID, AclBinding]:
        if self.acls is None:
            self.acls = dict(self.base.acls)
        return self.acls

    def _apply_client_quota(self, record: ClientQuotaRecord) -> None:
        if self.client_quotas is None:
            self.client_quotas = dict(self.base.client_quotas)
        values = dict(self.client_quotas.get(record.entity, {}))
        if record.remove:
            values.pop(record.key, None)
        else:
            values[record.key] = record.value
        if values:
            self.client_quotas[record.entity] = MappingProxyType(values)
        else:
            self.client_quotas.pop(record.entity, None)

    def _apply_partition(self, record: PartitionRecord) -> None:
        topics = self._topics()
        topic = topics.get(record.topic_id)
        if topic is None:
            return  # the topic was deleted after this record was written
        owned = self._own_partitions.get(record.topic_id)
        if owned is not None and owned[0] is topic:
            partitions = owned[1]  # not yet in any published image: changed in place
        else:
            partitions = dict(topic.partitions)
            topic = replace(topic, partitions=MappingProxyType(partitions))
            topics[record.topic_id] = topic
            self._own_partitions[record.topic_id] = topic, partitions
        directories = record.directories
        if len(directories) != len(record.replicas):
            previous = partitions.get(record.partition)
            directories = tuple(previous.directory_of(b) if previous else "" for b in record.replicas)
        if not any(directories):
            directories = ()  # nothing assigned: kept empty, as records before KIP-858 have it
        partitions[record.partition] = PartitionImage(
            record.partition, record.replicas, record.isr, record.leader, record.leader_epoch,
            record.partition_epoch, record.adding_replicas, record.removing_replicas, directories,
        )

    def _apply_broker_change(self, record: FenceBrokerRecord | UnfenceBrokerRecord | UnregisterBrokerRecord
                             | BrokerRegistrationChangeRecord) -> None:
        current = (self.brokers if self.brokers is not None else self.base.brokers).get(record.broker_id)
        if current is None or current.broker_epoch != record.broker_epoch:
            return  # decided about an incarnation that has since re-registered (or left): it no longer applies
        if isinstance(record, UnregisterBrokerRecord):
            del self._brokers()[record.broker_id]
        elif isinstance(record, BrokerRegistrationChangeRecord):
            self._brokers()[record.broker_id] = replace(current, log_dirs=record.log_dirs)
        else:
            fenced = isinstance(record, FenceBrokerRecord)
            if current.fenced != fenced:
                self._brokers()[record.broker_id] = replace(current, fenced=fenced)

    def _apply_config(self, record: ConfigRecord) -> None:
        configs = self._configs()
        key = (record.resource_type, record.resource_name)
        current = dict(configs.get(key, _EMPTY))
        if record.value is None:
            current.pop(record.name, None)
        else:
            current[record.name] = record.value
        if current:
            configs[key] = MappingProxyType(current)
        else:
            # No empty entries: readers fall back to _EMPTY anyway, and a snapshot could not re-create one.
            configs.pop(key, None)

    def _topics(self) -> dict[uuid.UUID, TopicImage]:
        if self.topics_by_id is None:
            self.topics_by_id = dict(self.base.topics_by_id)
        return self.topics_by_id

    def _brokers(self) -> dict[int, BrokerRegistration]:
        if self.brokers is None:
            self.brokers = dict(self.base.brokers)
        return self.brokers

    def _configs(self) -> dict[tuple[int, str], Mapping[str, str]]:
        if self.configs is None:
            self.configs = dict(self.base.configs)
        return self.configs

    def _scram(self) -> dict[tuple[str, int], UserScramCredentialRecord]:
        if self.scram_credentials is None:
            self.scram_credentials = dict(self.base.scram_credentials)
        return self.scram_credentials

    def _tokens(self) -> dict[str, DelegationTokenRecord]:
        if self.delegation_tokens is None:
            self.delegation_tokens = dict(self.base.delegation_tokens)
        return self.delegation_tokens

    def build(self, last_offset: int) -> MetadataImage:
        base = self.base
        topics_by_id = base.topics_by_id if self.topics_by_id is None else MappingProxyType(self.topics_by_id)
        topics_by_name = (
            base.topics_by_name
            if self.topics_by_id is None
            else MappingProxyType({t.name: t for t in self.topics_by_id.values()})
        )
        return MetadataImage(
            offset=last_offset,
            topics_by_name=topics_by_name,
            topics_by_id=topics_by_id,
            brokers=base.brokers if self.brokers is None else MappingProxyType(self.brokers),
            configs=base.configs if self.configs is None else MappingProxyType(self.configs),
            next_producer_id=self.next_producer_id,
            acls=base.acls if self.acls is None else MappingProxyType(self.acls),
            client_quotas=(base.client_quotas if self.client_quotas is None
                           else MappingProxyType(self.client_quotas)),
            scram_credentials=(base.scram_credentials if self.scram_credentials is None
                               else MappingProxyType(self.scram_credentials)),
            features=base.features if self.features is None else MappingProxyType(self.features),
            delegation_tokens=(base.delegation_tokens if self.delegation_tokens is None
                               else MappingProxyType(self.delegation_tokens)),
        )
