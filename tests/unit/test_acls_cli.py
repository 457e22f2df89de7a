"""`moldau acls`: how kafka-acls' options become ACLs and filters (no broker needed)."""

from __future__ import annotations

import argparse
from enum import Enum

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from moldau.cli import acls
from moldau.cli.common import CliError
from moldau.cli.main import build_parser


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["acls", *argv])


def enum_name(value: Enum | str | int) -> str:
    """An ACL field's name: AclBinding converts what it is given to the field's enum, though it types its
    attributes as what it accepts."""
    assert isinstance(value, Enum), value
    return value.name


def summary(bindings: list[AclBinding]) -> set[tuple[str, str, str, str, str, str]]:
    return {(enum_name(b.restype), b.name, enum_name(b.resource_pattern_type), b.principal, enum_name(b.operation),
             enum_name(b.permission_type)) for b in bindings}


def test_producer_shortcut() -> None:
    args = parse("add", "--allow-principal", "User:alice", "--producer", "--topic", "orders",
                 "--transactional-id", "tx", "--idempotent")
    assert summary(acls._bindings(args)) == {
        ("TOPIC", "orders", "LITERAL", "User:alice", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE")
    } | {("TRANSACTIONAL_ID", "tx", "LITERAL", "User:alice", op, "ALLOW") for op in ("WRITE", "DESCRIBE")} | {
        ("BROKER", "kafka-cluster", "LITERAL", "User:alice", "IDEMPOTENT_WRITE", "ALLOW")}


def test_consumer_shortcut_with_a_prefix_and_hosts() -> None:
    args = parse("add", "--deny-principal", "User:*", "--deny-host", "10.0.0.9", "--consumer", "--topic", "t-",
                 "--group", "g-", "--resource-pattern-type", "prefixed")
    bindings = acls._bindings(args)
    assert summary(bindings) == {("TOPIC", "t-", "PREFIXED", "User:*", "READ", "DENY"),
                                 ("TOPIC", "t-", "PREFIXED", "User:*", "DESCRIBE", "DENY"),
                                 ("GROUP", "g-", "PREFIXED", "User:*", "READ", "DENY")}
    assert {b.host for b in bindings} == {"10.0.0.9"}


def test_operations_on_the_cluster_and_bad_combinations() -> None:
    args = parse("add", "--allow-principal", "User:ops", "--operation", "Alter", "--operation", "describe_configs",
                 "--cluster")
    assert summary(acls._bindings(args)) == {("BROKER", "kafka-cluster", "LITERAL", "User:ops", "ALTER", "ALLOW"),
                                             ("BROKER", "kafka-cluster", "LITERAL", "User:ops", "DESCRIBE_CONFIGS",
                                              "ALLOW")}
    with pytest.raises(CliError, match="--consumer needs --group"):
        acls._bindings(parse("add", "--allow-principal", "User:a", "--consumer", "--topic", "t"))
    with pytest.raises(CliError, match="literal or prefixed"):
        acls._bindings(parse("add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t",
                             "--resource-pattern-type", "match"))
    with pytest.raises(CliError, match="principal"):
        acls._bindings(parse("add", "--operation", "Read", "--topic", "t"))
    with pytest.raises(SystemExit):
        parse("add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t")


def test_filters_for_list_and_remove() -> None:
    (everything,) = acls._filters(parse("list"))
    # AclBindingFilter's stubs type name and principal as str, though a filter's None (any) is what it is for.
    assert (everything.restype, everything.name, everything.resource_pattern_type, everything.principal,  # type: ignore[comparison-overlap]
            everything.operation, everything.permission_type) == (
        ResourceType.ANY, None, ResourcePatternType.ANY, None, AclOperation.ANY, AclPermissionType.ANY)
    filters = acls._filters(parse("remove", "--allow-principal", "User:bob", "--topic", "orders", "--force"))
    assert [(f.restype, f.name, f.principal, f.operation, f.permission_type) for f in filters] == [
        (ResourceType.TOPIC, "orders", "User:bob", AclOperation.ANY, AclPermissionType.ALLOW)]

