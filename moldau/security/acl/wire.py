"""ACLs to and from the messages of CreateAcls, DescribeAcls and DeleteAcls (v3), for the clients Moldau sends
them with: `moldau acls` and the console's ACL page. (confluent-kafka's admin API knows neither User nor
DelegationToken resources, nor the token operations; these messages carry every type Kafka has.)"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.static.primitive import i8

from moldau.security.acl.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


def create_request(bindings: Iterable[AclBinding]) -> CreateAclsRequest:
    return CreateAclsRequest(creations=tuple(
        AclCreation(resource_type=i8(b.resource_type), resource_name=b.resource_name,
                    resource_pattern_type=i8(b.pattern_type), principal=b.principal, host=b.host,
                    operation=i8(b.operation), permission_type=i8(b.permission)) for b in bindings))


def describe_request(acl_filter: AclBindingFilter) -> DescribeAclsRequest:
    f = acl_filter
    return DescribeAclsRequest(resource_type_filter=i8(f.resource_type), resource_name_filter=f.resource_name,
                               pattern_type_filter=i8(f.pattern_type), principal_filter=f.principal,
                               host_filter=f.host, operation=i8(f.operation), permission_type=i8(f.permission))


def delete_request(filters: Sequence[AclBindingFilter]) -> DeleteAclsRequest:
    return DeleteAclsRequest(filters=tuple(
        DeleteAclsFilter(resource_type_filter=i8(f.resource_type), resource_name_filter=f.resource_name,
                         pattern_type_filter=i8(f.pattern_type), principal_filter=f.principal, host_filter=f.host,
                         operation=i8(f.operation), permission_type=i8(f.permission)) for f in filters))


def described(response: Any) -> list[AclBinding]:
    """The ACLs of a DescribeAclsResponse (its error code is the caller's to check)."""
    return [binding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                    a.permission_type) for r in response.resources for a in r.acls]


def deleted(filter_result: Any) -> list[AclBinding]:
    """The ACLs one filter of a DeleteAclsResponse removed."""
    return [binding(a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation,
                    a.permission_type) for a in filter_result.matching_acls]


def binding(resource_type: int, name: str, pattern: int, principal: str, host: str, operation: int,
            permission: int) -> AclBinding:
    """An ACL from its wire codes; a code this version of Kafka's vocabulary lacks is UNKNOWN (0)."""
    return AclBinding(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern), principal, host,
                      _enum(AclOperation, operation), _enum(AclPermissionType, permission))


def _enum(kind: Any, code: int) -> Any:
    try:
        return kind(code)
    except ValueError:
        return kind(0)
