"""The authorization decision: StandardAuthorizer's rules, on ACL sets built by hand."""

from __future__ import annotations

import uuid

import pytest

from moldau.security.acl.authorizer import Authorizer
from moldau.security.acl.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
)

Op, Perm, Pat, Res = AclOperation, AclPermissionType, PatternType, ResourceType
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(principal: str, op: AclOperation, name: str = "orders", perm: AclPermissionType = Perm.ALLOW,
        pattern: PatternType = Pat.LITERAL, host: str = "*", rtype: ResourceType = Res.TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def acls(*bindings: AclBinding) -> dict[uuid.UUID, AclBinding]:
    return {uuid.uuid4(): b for b in bindings}


def allowed(table: dict[uuid.UUID, AclBinding], op: AclOperation, name: str = "orders", principal: str = ALICE,
            host: str = HOST, rtype: ResourceType = Res.TOPIC, authorizer: Authorizer | None = None) -> bool:
    return (authorizer or Authorizer()).authorize(table, principal, host, op, rtype, name)


def test_no_acl_found_refuses_by_default_and_allows_when_configured() -> None:
    assert not allowed({}, Op.READ)
    assert allowed({}, Op.READ, authorizer=Authorizer(allow_everyone_if_no_acl_found=True))
    # An ACL on the resource for someone else means "ACLs found": alice is refused even then.
    table = acls(acl(BOB, Op.READ))
    assert not allowed(table, Op.READ, authorizer=Authorizer(allow_everyone_if_no_acl_found=True))
    assert allowed(table, Op.READ, principal=BOB, authorizer=Authorizer(allow_everyone_if_no_acl_found=True))


def test_allow_is_per_principal_operation_and_resource() -> None:
    table = acls(acl(ALICE, Op.WRITE))
    assert allowed(table, Op.WRITE)
    assert not allowed(table, Op.READ)
    assert not allowed(table, Op.WRITE, principal=BOB)
    assert not allowed(table, Op.WRITE, name="payments")
    assert not allowed(table, Op.WRITE, rtype=Res.GROUP)


def test_deny_beats_allow_wherever_it_comes_from() -> None:
    table = acls(acl(ALICE, Op.ALL), acl("User:*", Op.WRITE, name="ord", pattern=Pat.PREFIXED, perm=Perm.DENY))
    assert allowed(table, Op.READ)
    assert not allowed(table, Op.WRITE)
    table = acls(acl(ALICE, Op.READ, name="*"), acl(ALICE, Op.ALL, perm=Perm.DENY))
    assert not allowed(table, Op.READ)


def test_prefixed_and_wildcard_patterns() -> None:
    table = acls(acl(ALICE, Op.READ, name="team-a.", pattern=Pat.PREFIXED), acl(BOB, Op.READ, name="*"))
    assert allowed(table, Op.READ, name="team-a.orders")
    assert allowed(table, Op.READ, name="team-a.")
    assert not allowed(table, Op.READ, name="team-b.orders")
    assert not allowed(table, Op.READ, name="team-a")
    assert allowed(table, Op.READ, name="anything", principal=BOB)
    # A LITERAL ACL named like a prefix matches only that name.
    table = acls(acl(ALICE, Op.READ, name="team-a."))
    assert not allowed(table, Op.READ, name="team-a.orders")


def test_implications_apply_to_allow_only() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert allowed(acls(acl(ALICE, op)), Op.DESCRIBE)
    assert not allowed(acls(acl(ALICE, Op.CREATE)), Op.DESCRIBE)
    assert allowed(acls(acl(ALICE, Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not allowed(acls(acl(ALICE, Op.DESCRIBE_CONFIGS)), Op.ALTER_CONFIGS)
    assert not allowed(acls(acl(ALICE, Op.DESCRIBE)), Op.READ)
    # A DENY of READ does not deny DESCRIBE.
    assert allowed(acls(acl(ALICE, Op.DESCRIBE), acl(ALICE, Op.READ, perm=Perm.DENY)), Op.DESCRIBE)


def test_wildcard_principal_and_host_filters() -> None:
    table = acls(acl("User:*", Op.READ, host=HOST))
    assert allowed(table, Op.READ, principal=BOB)
    assert not allowed(table, Op.READ, host="10.0.0.2")
    table = acls(acl(ALICE, Op.READ), acl(ALICE, Op.READ, perm=Perm.DENY, host="10.0.0.2"))
    assert allowed(table, Op.READ)
    assert not allowed(table, Op.READ, host="10.0.0.2")


def test_super_users_may_do_everything() -> None:
    authorizer = Authorizer(super_users=["User:admin"])
    table = acls(acl("User:*", Op.ALL, perm=Perm.DENY))
    assert allowed(table, Op.DELETE, principal="User:admin", authorizer=authorizer)
    assert not allowed(table, Op.DELETE, authorizer=authorizer)


def test_decisions_follow_a_changed_acl_set() -> None:
    authorizer = Authorizer()
    table = acls(acl(ALICE, Op.READ))
    assert allowed(table, Op.READ, authorizer=authorizer)
    assert not allowed(acls(acl(ALICE, Op.READ, perm=Perm.DENY)), Op.READ, authorizer=authorizer)


def test_many_acls_are_indexed() -> None:
    table = acls(*(acl(f"User:u{i}", Op.WRITE, name=f"topic-{i}") for i in range(2000)),
                 *(acl(ALICE, Op.READ, name=f"p{i}-", pattern=Pat.PREFIXED) for i in range(500)))
    authorizer = Authorizer()
    assert allowed(table, Op.WRITE, name="topic-1999", principal="User:u1999", authorizer=authorizer)
    assert not allowed(table, Op.WRITE, name="topic-1999", principal="User:u1", authorizer=authorizer)
    assert allowed(table, Op.READ, name="p42-x", authorizer=authorizer)
    assert len(authorizer.index(table).matching(Res.TOPIC, "p42-x")) == 1


def test_authorized_operations_bit_set() -> None:
    table = acls(acl(ALICE, Op.READ), acl(ALICE, Op.ALTER_CONFIGS))
    bits = Authorizer().authorized_operations(table, ALICE, HOST, Res.TOPIC, "orders")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)


def test_filters() -> None:
    literal = acl(ALICE, Op.READ, name="team-a.orders")
    prefixed = acl(ALICE, Op.READ, name="team-a.", pattern=Pat.PREFIXED)
    wildcard = acl(BOB, Op.WRITE, name="*")
    everything = [literal, prefixed, wildcard]
    assert [a for a in everything if AclBindingFilter().matches(a)] == everything
    match = AclBindingFilter(Res.TOPIC, "team-a.orders", Pat.MATCH)
    assert [a for a in everything if match.matches(a)] == everything
    any_pattern = AclBindingFilter(Res.TOPIC, "team-a.", Pat.ANY)
    assert [a for a in everything if any_pattern.matches(a)] == [prefixed]
    assert [a for a in everything if AclBindingFilter(principal=BOB).matches(a)] == [wildcard]
    assert [a for a in everything if AclBindingFilter(operation=Op.WRITE).matches(a)] == [wildcard]
    assert not AclBindingFilter(Res.GROUP).matches(literal)


def test_invalid_acls_are_refused() -> None:
    with pytest.raises(InvalidAcl):
        acl(ALICE, Op.ANY).validate()
    with pytest.raises(InvalidAcl):
        acl(ALICE, Op.READ, pattern=Pat.MATCH).validate()
    with pytest.raises(InvalidAcl):
        acl("alice", Op.READ).validate()
    with pytest.raises(InvalidAcl):
        acl(ALICE, Op.ALTER, name="other", rtype=Res.CLUSTER).validate()
    acl(ALICE, Op.ALTER, name="kafka-cluster", rtype=Res.CLUSTER).validate()


def test_authorize_any_resource_of_a_type() -> None:
    authorizer = Authorizer()
    table = acls(acl(ALICE, Op.WRITE, name="team-", pattern=Pat.PREFIXED), acl(BOB, Op.WRITE, name="x"),
                 acl(BOB, Op.WRITE, name="x", perm=Perm.DENY))
    assert authorizer.authorize_any(table, ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not authorizer.authorize_any(table, ALICE, HOST, Op.READ, Res.TOPIC)
    assert not authorizer.authorize_any(table, BOB, HOST, Op.WRITE, Res.TOPIC)  # its only allow is denied
    everything_denied = acls(acl(ALICE, Op.WRITE, name="a"), acl(ALICE, Op.ALL, name="*", perm=Perm.DENY))
    assert not authorizer.authorize_any(everything_denied, ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert Authorizer(allow_everyone_if_no_acl_found=True).authorize_any({}, ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not authorizer.authorize_any({}, ALICE, HOST, Op.WRITE, Res.TOPIC)
