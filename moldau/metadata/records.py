"""Metadata records: the only way cluster metadata changes.

Topics, partitions, configs, brokers and producer-id blocks are facts appended to the metadata log and replayed
into a `MetadataImage`. A single node appends to a local log; a cluster will replicate the same records with
Raft, so nothing here knows which of the two it is.

Records serialise to compact JSON with a type tag: metadata changes are rare, and a readable log is worth more
than the bytes saved by a binary format.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import MISSING, asdict, dataclass, fields, is_dataclass
from typing import Any, ClassVar

# Kafka's ConfigResource types.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32


@dataclass(frozen=True, slots=True)
class TopicRecord:
    TYPE: ClassVar[str] = "topic"
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """A partition's placement and leadership; a later record for the same partition replaces it.

    While a reassignment moves the partition (KIP-455), `replicas` holds the target replicas followed by the ones
    being removed, `adding_replicas` the target replicas that are new and `removing_replicas` the ones that leave
    when the target replicas are all in the ISR. Both are empty otherwise, and default to empty, so records
    written before reassignments existed still decode.

    `directories` (KIP-858) gives, per replica in `replicas` order, the `directory.id` of the log directory that
    holds it on its broker ("" while the broker has not said). Empty means "unchanged": each replica that stays
    keeps the directory it had, so leadership and ISR changes need not repeat the assignment.
    """

    TYPE: ClassVar[str] = "partition"
    topic_id: uuid.UUID
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    directories: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    TYPE: ClassVar[str] = "remove_topic"
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """Sets (value is a string) or removes (value is None) one config of a topic or broker."""

    TYPE: ClassVar[str] = "config"
    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    """A broker (re-)registers; the image keeps the latest one per broker id, with `fenced` kept current.

    `broker_epoch` is the metadata offset of the registration, so every incarnation has a larger epoch than the
    one before; fence, unfence and unregister records name it so a stale decision cannot touch a newer
    incarnation. `fenced` defaults to False because records written before fencing existed (single node) had no
    such field and their broker was always serving; a cluster controller writes new registrations with
    `fenced=True` and unfences the broker once it has caught up with the metadata log.

    `log_dirs` (KIP-858) are the `directory.id`s of the broker's online log directories; empty when the broker
    did not say (every directory counts as online then). A replica assigned to a directory not listed is offline.
    """

    TYPE: ClassVar[str] = "register_broker"
    broker_id: int
    incarnation_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    broker_epoch: int = -1
    fenced: bool = False
    log_dirs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    """The broker may no longer lead or be in an ISR (missed heartbeats, asked to be fenced, shutting down)."""

    TYPE: ClassVar[str] = "fence_broker"
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord:
    """The broker has caught up with the metadata log and may serve again."""

    TYPE: ClassVar[str] = "unfence_broker"
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    """A registered broker's online log directories change (Kafka's BrokerRegistrationChangeRecord LogDirs): a
    directory reported offline in a heartbeat leaves `log_dirs`, and with it every replica assigned to it."""

    TYPE: ClassVar[str] = "broker_registration_change"
    broker_id: int
    broker_epoch: int
    log_dirs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    """The broker leaves the cluster (decommissioned): its registration is dropped."""

    TYPE: ClassVar[str] = "unregister_broker"
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """The controller handed out producer ids below `next_producer_id`."""

    TYPE: ClassVar[str] = "producer_ids"
    broker_id: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """An ACL (Kafka's AccessControlEntryRecord): the codes are Kafka's ResourceType, PatternType, AclOperation
    and AclPermissionType (see moldau.security.acl.model); `id` names it for removal."""

    TYPE: ClassVar[str] = "acl"
    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    TYPE: ClassVar[str] = "remove_acl"
    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    """Sets (`remove` False) or removes one client quota of an entity, like Kafka's ClientQuotaRecord.

    `entity` is the sorted (entity type, name) pairs, such as (("client-id", "app"), ("user", "alice")); a None
    name is the entity type's default (`<default>`).
    """

    TYPE: ClassVar[str] = "client_quota"
    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism (Kafka's UserScramCredentialRecord); replaces an earlier one.

    `mechanism` is Kafka's code (1 SCRAM-SHA-256, 2 SCRAM-SHA-512); salt and keys are base64, never a password.
    """

    TYPE: ClassVar[str] = "user_scram_credential"
    name: str
    mechanism: int
    salt: str
    stored_key: str
    server_key: str
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    """Deletes a user's SCRAM credential for one mechanism."""

    TYPE: ClassVar[str] = "remove_user_scram_credential"
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class DelegationTokenRecord:
    """A delegation token (Kafka's DelegationTokenRecord, KIP-48); a later record for the same id replaces it (a
    renewal or a shortened expiry). Principals are `Type:name`; times are wall-clock milliseconds. The token's HMAC
    is not stored: every node derives it from `delegation.token.secret.key`, as Kafka's do."""

    TYPE: ClassVar[str] = "delegation_token"
    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int


@dataclass(frozen=True, slots=True)
class RemoveDelegationTokenRecord:
    """Deletes a delegation token (expired by its owner, or past its expiry)."""

    TYPE: ClassVar[str] = "remove_delegation_token"
    token_id: str


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    """A feature's finalized level (Kafka's FeatureLevelRecord, KIP-584); level 0 turns the feature off."""

    TYPE: ClassVar[str] = "feature_level"
    name: str
    feature_level: int


MetadataRecord = (
    TopicRecord | PartitionRecord | RemoveTopicRecord | ConfigRecord | RegisterBrokerRecord | FenceBrokerRecord
    | UnfenceBrokerRecord | UnregisterBrokerRecord | BrokerRegistrationChangeRecord | ProducerIdsRecord
    | ClientQuotaRecord
    | UserScramCredentialRecord | RemoveUserScramCredentialRecord | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord | FeatureLevelRecord | DelegationTokenRecord | RemoveDelegationTokenRecord
)
_TYPES: dict[str, type[Any]] = {
    cls.TYPE: cls
    for cls in (TopicRecord, PartitionRecord, RemoveTopicRecord, ConfigRecord, RegisterBrokerRecord,
                FenceBrokerRecord, UnfenceBrokerRecord, UnregisterBrokerRecord, BrokerRegistrationChangeRecord,
                ProducerIdsRecord,
                ClientQuotaRecord, UserScramCredentialRecord, RemoveUserScramCredentialRecord,
                AccessControlEntryRecord, RemoveAccessControlEntryRecord, FeatureLevelRecord,
                DelegationTokenRecord, RemoveDelegationTokenRecord)
}
_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {cls: tuple(f.name for f in fields(cls)) for cls in _TYPES.values()}


class RecordDecodeError(ValueError):
    pass


def encode_record(record: MetadataRecord) -> bytes:
    # The same JSON as `asdict` would give, without its deep copy of every field: a CreateTopics of thousands of
    # partitions encodes a record each on the event loop, and `asdict` was three quarters of that.
    body = {name: _plain(getattr(record, name)) for name in _FIELD_NAMES[type(record)]}
    body["type"] = record.TYPE
    return json.dumps(body, default=_json_default, separators=(",", ":")).encode()


def _plain(value: object) -> object:
    """A field's value as JSON takes it: records nest dataclasses only as tuples of them (a broker's endpoints)."""
    if isinstance(value, tuple) and value and is_dataclass(value[0]):
        return [asdict(item) for item in value]
    return value


def _json_default(value: object) -> object:
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"cannot encode {type(value).__name__}")


def decode_record(data: bytes) -> MetadataRecord:
    try:
        body = json.loads(data)
        cls = _TYPES[body.pop("type")]
        # A field missing from the JSON takes its default: that is how records written by older code, before the
        # field existed, still decode. A missing field without a default is an error.
        return cls(**{  # type: ignore[no-any-return]
            f.name: _coerce(f.name, body[f.name]) for f in fields(cls) if f.name in body or f.default is MISSING
        })
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordDecodeError(f"invalid metadata record: {exc}") from exc


def _coerce(name: str, value: Any) -> Any:
    if name in ("topic_id", "incarnation_id", "id"):
        return uuid.UUID(value)
    if name in ("replicas", "isr", "adding_replicas", "removing_replicas", "directories", "log_dirs", "renewers"):
        return tuple(value)
    if name == "entity":
        return tuple((str(entity_type), None if entity_name is None else str(entity_name))
                     for entity_type, entity_name in value)
    if name == "endpoints":
        return tuple(Endpoint(**e) for e in value)
    return value
