"""ACLs to and from the ACL APIs' messages, through kio's encoding as a client sends and reads them."""

from __future__ import annotations

import datetime
import io
from typing import Any

from kio.schema.describe_acls.v3.response import AclDescription, DescribeAclsResource, DescribeAclsResponse
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i32Timedelta

from moldau.security.acl import wire
from moldau.security.acl.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

TOKENS = AclBinding(ResourceType.USER, "User:carol", PatternType.LITERAL, "User:alice", "*",
                    AclOperation.CREATE_TOKENS, AclPermissionType.ALLOW)


def round_trip(entity: Any) -> Any:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return entity_reader(type(entity))(out.getvalue(), 0)[0]


def test_requests_carry_every_resource_type_and_operation() -> None:
    (creation,) = round_trip(wire.create_request([TOKENS])).creations
    assert (creation.resource_type, creation.resource_name, creation.operation) == (7, "User:carol", 13)
    request = round_trip(wire.describe_request(AclBindingFilter(ResourceType.DELEGATION_TOKEN)))
    assert (request.resource_type_filter, request.resource_name_filter) == (6, None)
    (deletion,) = round_trip(wire.delete_request([AclBindingFilter(operation=AclOperation.DESCRIBE_TOKENS)])
                             ).filters
    assert (deletion.operation, deletion.principal_filter) == (14, None)


def test_answers_become_bindings_and_unknown_codes_stay_readable() -> None:
    response = DescribeAclsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)), error_code=ErrorCode.none,
        error_message=None, resources=(
            DescribeAclsResource(resource_type=i8(7), resource_name="User:carol", pattern_type=i8(3), acls=(
                AclDescription(principal="User:alice", host="*", operation=i8(13), permission_type=i8(3)),)),
            DescribeAclsResource(resource_type=i8(99), resource_name="future", pattern_type=i8(3), acls=(
                AclDescription(principal="User:bob", host="*", operation=i8(42), permission_type=i8(3)),))))
    tokens, future = wire.described(round_trip(response))
    assert tokens == TOKENS
    assert (future.resource_type, future.operation) == (ResourceType.UNKNOWN, AclOperation.UNKNOWN)
