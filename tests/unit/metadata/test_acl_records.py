"""ACL records: encoding, replay into the image, and snapshots."""

from __future__ import annotations

import asyncio
import uuid

from moldau.metadata.image import MetadataImage, acl_record
from moldau.metadata.records import RemoveAccessControlEntryRecord, decode_record, encode_record
from moldau.security.acl.model import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

ACL = AclBinding(ResourceType.TOPIC, "team-a.", PatternType.PREFIXED, "User:alice", "*", AclOperation.WRITE,
                 AclPermissionType.ALLOW)


def test_acl_records_round_trip() -> None:
    record = acl_record(uuid.uuid4(), ACL)
    assert decode_record(encode_record(record)) == record
    removal = RemoveAccessControlEntryRecord(record.id)
    assert decode_record(encode_record(removal)) == removal


def test_acls_replay_into_the_image_and_its_snapshot() -> None:
    first, second = uuid.uuid4(), uuid.uuid4()
    other = AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL, "User:*", "10.0.0.1", AclOperation.READ,
                       AclPermissionType.DENY)
    image = MetadataImage().apply([acl_record(first, ACL), acl_record(second, other)], 1)
    assert dict(image.acls) == {first: ACL, second: other}
    before = image.acls
    image = image.apply([RemoveAccessControlEntryRecord(first)], 2)
    assert dict(image.acls) == {second: other}
    assert dict(before) == {first: ACL, second: other}  # images are immutable
    assert MetadataImage().apply(image.to_records(), 2).acls == image.acls


def test_the_controller_stores_valid_acls_once_and_removes_what_filters_match() -> None:
    from moldau.protocol.errors import ErrorCode
    from moldau.security.acl.model import AclBindingFilter
    from tests.unit.metadata.test_reassignment import controller

    ctl, quorum = controller([1], [])
    invalid = AclBinding(ResourceType.TOPIC, "t", PatternType.MATCH, "User:alice", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)
    results = asyncio.run(ctl.create_acls([ACL, invalid, ACL]))
    assert results[0] is None and results[2] is None
    assert results[1] is not None and results[1].code == ErrorCode.invalid_request
    assert list(quorum.image.acls.values()) == [ACL]  # one entry, the duplicate not stored twice
    assert len(quorum.entries) == 1
    assert asyncio.run(ctl.create_acls([ACL])) == [None]
    assert len(quorum.entries) == 1  # nothing new to store
    removed = asyncio.run(ctl.delete_acls([AclBindingFilter(principal="User:bob"),
                                           AclBindingFilter(ResourceType.TOPIC, "team-a.orders", PatternType.MATCH)]))
    assert removed == [[], [ACL]]
    assert dict(quorum.image.acls) == {}
