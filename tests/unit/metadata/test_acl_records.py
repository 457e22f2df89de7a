"""ACL records: encoding, replay into the image, and snapshots."""

from __future__ import annotations

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
