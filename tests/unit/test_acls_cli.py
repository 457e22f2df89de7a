"""`moldau acls`: how kafka-acls' options become ACLs and filters (no broker needed)."""

from __future__ import annotations

import argparse

import pytest

from moldau.cli import acls
from moldau.cli.common import CliError
from moldau.cli.main import build_parser
from moldau.security.acl.model import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["acls", *argv])


def summary(bindings: list[AclBinding]) -> set[tuple[str, str, str, str, str, str]]:
    return {(b.resource_type.name, b.resource_name, b.pattern_type.name, b.principal, b.operation.name,
             b.permission.name) for b in bindings}


def test_producer_shortcut() -> None:
    args = parse("add", "--allow-principal", "User:alice", "--producer", "--topic", "orders",
                 "--transactional-id", "tx", "--idempotent")
    assert summary(acls._bindings(args)) == {
        ("TOPIC", "orders", "LITERAL", "User:alice", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE")
    } | {("TRANSACTIONAL_ID", "tx", "LITERAL", "User:alice", op, "ALLOW") for op in ("WRITE", "DESCRIBE")} | {
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:alice", "IDEMPOTENT_WRITE", "ALLOW")}


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
    assert summary(acls._bindings(args)) == {("CLUSTER", "kafka-cluster", "LITERAL", "User:ops", "ALTER", "ALLOW"),
                                             ("CLUSTER", "kafka-cluster", "LITERAL", "User:ops", "DESCRIBE_CONFIGS",
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
    assert (everything.resource_type, everything.resource_name, everything.pattern_type, everything.principal,
            everything.operation, everything.permission) == (
        ResourceType.ANY, None, PatternType.ANY, None, AclOperation.ANY, AclPermissionType.ANY)
    filters = acls._filters(parse("remove", "--allow-principal", "User:bob", "--topic", "orders", "--force"))
    assert [(f.resource_type, f.resource_name, f.principal, f.operation, f.permission) for f in filters] == [
        (ResourceType.TOPIC, "orders", "User:bob", AclOperation.ANY, AclPermissionType.ALLOW)]


def test_user_and_delegation_token_resources_for_token_acls() -> None:
    args = parse("add", "--allow-principal", "User:alice", "--operation", "CreateTokens", "--operation",
                 "describe-tokens", "--user-principal", "User:carol")
    assert summary(acls._bindings(args)) == {("USER", "User:carol", "LITERAL", "User:alice", op, "ALLOW")
                                             for op in ("CREATE_TOKENS", "DESCRIBE_TOKENS")}
    args = parse("add", "--allow-principal", "User:bob", "--operation", "Describe", "--delegation-token", "tid")
    assert summary(acls._bindings(args)) == {("DELEGATION_TOKEN", "tid", "LITERAL", "User:bob", "DESCRIBE", "ALLOW")}
    for binding in acls._bindings(args):
        binding.validate()  # the broker stores it

