"""The authorization decision, as Kafka's StandardAuthorizer makes it. No I/O: it reads the ACLs it is given.

`authorize(acls, principal, host, operation, resource_type, name)`:

1. a principal listed in `super.users` may do everything;
2. the ACLs that apply to the resource are those of its type whose pattern matches the name: LITERAL with the
   same name, LITERAL `*`, and PREFIXED with a prefix of the name;
3. among those, the ones for this principal (or `User:*`) and this host (or `*`) decide: a DENY of the operation
   (or of ALL) refuses, whatever else allows; else an ALLOW of the operation, of ALL, or of an operation that
   implies it (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
4. with no ACL at all on the resource, `allow.everyone.if.no.acl.found` decides (false by default); otherwise
   what no ACL allows is refused.

The ACLs come from the metadata image (a mapping of ACL id to `AclBinding`); the index over them is rebuilt
when the image's ACL mapping changes (it is replaced, never mutated), so a check is a few dict lookups however
many ACLs there are: by resource type, then by name for LITERAL ACLs and by each prefix length in use for
PREFIXED ones. Decisions are memoised per index, since a producer asks the same question on every request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.security.acl.model import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

# Accepted values of `authorizer.class.name` (Kafka's class names, and a short one).
STANDARD_AUTHORIZER_NAMES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "StandardAuthorizer",
})

_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}

# The operations a resource type supports, for KIP-430's authorized-operations bit sets.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}

_MEMO_LIMIT = 100_000


@dataclass(slots=True)
class _TypeIndex:
    literal: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefixed: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefix_lengths: list[int] = field(default_factory=list)


class AclIndex:
    """The ACLs of one image, indexed for lookup by resource."""

    def __init__(self, acls: Iterable[AclBinding]) -> None:
        self._types: dict[ResourceType, _TypeIndex] = {}
        for acl in acls:
            index = self._types.setdefault(acl.resource_type, _TypeIndex())
            table = index.literal if acl.pattern_type == PatternType.LITERAL else index.prefixed
            table.setdefault(acl.resource_name, []).append(acl)
        for index in self._types.values():
            index.prefix_lengths = sorted({len(p) for p in index.prefixed})
        self.memo: dict[tuple[Any, ...], bool] = {}

    def of_type(self, resource_type: ResourceType) -> list[AclBinding]:
        index = self._types.get(resource_type)
        if index is None:
            return []
        return [a for table in (index.literal, index.prefixed) for acls in table.values() for a in acls]

    def matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL whose resource pattern matches this resource."""
        index = self._types.get(resource_type)
        if index is None:
            return []
        found = list(index.literal.get(name, ()))
        if name != WILDCARD_RESOURCE:
            found += index.literal.get(WILDCARD_RESOURCE, ())
        for length in index.prefix_lengths:
            if length > len(name):
                break
            found += index.prefixed.get(name[:length], ())
        return found


class Authorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._source: Mapping[Any, AclBinding] | None = None
        self._index = AclIndex(())

    @classmethod
    def from_config(cls, config: Any) -> Authorizer | None:
        """The authorizer `authorizer.class.name` asks for, or None when it is unset (no authorization)."""
        name = config.authorizer_class_name
        if not name:
            return None
        if name not in STANDARD_AUTHORIZER_NAMES:
            raise ValueError(f"authorizer.class.name={name!r} is not supported; use "
                             "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
        return cls(config.super_users, config.allow_everyone_if_no_acl_found)

    def index(self, acls: Mapping[Any, AclBinding]) -> AclIndex:
        if acls is not self._source:
            self._index = AclIndex(acls.values())
            self._source = acls
        return self._index

    def authorize(self, acls: Mapping[Any, AclBinding], principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        index = self.index(acls)
        key = (principal, host, operation, resource_type, name)
        decision = index.memo.get(key)
        if decision is None:
            decision = self._decide(index.matching(resource_type, name), principal, host, operation)
            if len(index.memo) >= _MEMO_LIMIT:
                index.memo.clear()
            index.memo[key] = decision
        return decision

    def _decide(self, acls: list[AclBinding], principal: str, host: str, operation: AclOperation) -> bool:
        if not acls:
            return self.allow_everyone_if_no_acl_found
        implied_by = _IMPLIED_BY.get(operation, frozenset())
        allowed = False
        for acl in acls:
            if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD_HOST):
                continue
            if acl.permission == AclPermissionType.DENY:
                if acl.operation in (operation, AclOperation.ALL):
                    return False
            elif acl.operation in (operation, AclOperation.ALL) or acl.operation in implied_by:
                allowed = True
        return allowed

    def authorize_any(self, acls: Mapping[Any, AclBinding], principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """May the principal do `operation` on some resource of the type? (Kafka's authorizeByResourceType, for
        idempotent producers: an ALLOW of it (or ALL) on some pattern that no DENY of the same pattern cancels.)"""
        if principal in self.super_users:
            return True
        index = self.index(acls)
        mine = [a for a in index.of_type(resource_type)
                if a.principal in (principal, WILDCARD_PRINCIPAL) and a.host in (host, WILDCARD_HOST)
                and a.operation in (operation, AclOperation.ALL)]
        denied = {(a.pattern_type, a.resource_name) for a in mine if a.permission == AclPermissionType.DENY}
        if (PatternType.LITERAL, WILDCARD_RESOURCE) in denied:
            return False
        if any(a.permission == AclPermissionType.ALLOW and (a.pattern_type, a.resource_name) not in denied
               for a in mine):
            return True
        return self.allow_everyone_if_no_acl_found and not index.of_type(resource_type)

    def authorized_operations(self, acls: Mapping[Any, AclBinding], principal: str, host: str,
                              resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit set: bit `op` set for each operation of the resource type the principal may do."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(acls, principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits
