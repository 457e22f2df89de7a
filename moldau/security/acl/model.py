"""ACLs and ACL filters, with Kafka's names and wire codes.

An ACL (`AclBinding`) says: principal P, from host H, is ALLOWed (or DENYed) operation O on the resources matched
by a resource pattern (type, name, LITERAL or PREFIXED). A LITERAL name `*` matches every resource of the type;
a principal `User:*` matches every user; a host `*` matches every address.

A filter (`AclBindingFilter`) selects ACLs: ANY fields match anything, a None name/principal/host matches any;
the pattern type ANY matches LITERAL and PREFIXED ACLs with exactly that name, MATCH matches the ACLs that would
apply to a resource of that name (the literal name, the `*` wildcard and every prefix of it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name, as Kafka spells it

# The resource types and operations an ACL may name (no ANY or UNKNOWN).
ACL_RESOURCE_TYPES = frozenset({ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN, ResourceType.USER})
_CONCRETE_OPERATIONS = frozenset(op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY))


class InvalidAcl(ValueError):
    """An ACL or filter that cannot be stored or applied (Kafka: INVALID_REQUEST)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def validate(self) -> None:
        if self.resource_type not in ACL_RESOURCE_TYPES:
            raise InvalidAcl(f"an ACL cannot be on resource type {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"an ACL's pattern type is LITERAL or PREFIXED, not {self.pattern_type.name}")
        if not self.resource_name:
            raise InvalidAcl("an ACL needs a resource name")
        if self.resource_type == ResourceType.CLUSTER and (
                self.resource_name != CLUSTER_NAME or self.pattern_type != PatternType.LITERAL):
            raise InvalidAcl(f"the cluster resource is LITERAL {CLUSTER_NAME!r}")
        if self.operation not in _CONCRETE_OPERATIONS:
            raise InvalidAcl(f"an ACL cannot have operation {self.operation.name}")
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidAcl(f"an ACL's permission is ALLOW or DENY, not {self.permission.name}")
        principal_type, sep, name = self.principal.partition(":")
        if not sep or not principal_type or not name:
            raise InvalidAcl(f"a principal is TYPE:NAME, such as User:alice, not {self.principal!r}")
        if not self.host:
            raise InvalidAcl("an ACL needs a host (* for any)")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def validate(self) -> None:
        for value, label in ((self.resource_type, "resource type"), (self.pattern_type, "pattern type"),
                             (self.operation, "operation"), (self.permission, "permission type")):
            if value == 0:
                raise InvalidAcl(f"a filter cannot have an UNKNOWN {label}")

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if not self._matches_pattern(acl):
            return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation not in (AclOperation.ANY, acl.operation):
            return False
        return self.permission in (AclPermissionType.ANY, acl.permission)

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name in (self.resource_name, WILDCARD_RESOURCE)
            return self.resource_name.startswith(acl.resource_name)
        if self.pattern_type not in (PatternType.ANY, acl.pattern_type):
            return False
        return self.resource_name is None or self.resource_name == acl.resource_name
