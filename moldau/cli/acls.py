"""`moldau acls`: add, list and remove ACLs, with kafka-acls' options.

Requests go through confluent-kafka's `AdminClient` (CreateAcls, DescribeAcls, DeleteAcls), so the tool works
against any Kafka-compatible broker, and `--command-config FILE` gives it a Kafka client properties file (for
example `security.protocol`, `sasl.mechanism`, `sasl.username`) to reach a secured one.

Resources are `--topic`, `--group`, `--transactional-id` (each repeatable) and `--cluster`; principals
`--allow-principal` / `--deny-principal` (with `--allow-host` / `--deny-host`, `*` by default); operations
`--operation` (repeatable, kafka-acls' names such as Read, Write, Describe, IdempotentWrite, All). The shortcuts:
`--producer` (WRITE, DESCRIBE and CREATE on the topics; WRITE and DESCRIBE on the transactional id;
IDEMPOTENT_WRITE on the cluster with `--idempotent`) and `--consumer` (READ and DESCRIBE on the topics, READ on
the group).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from moldau.cli.common import CliError, add_action
from moldau.cli.output import add_output_option, emit
from moldau.cli.raw_request import call, check
from moldau.security.acl import wire
from moldau.security.acl.model import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

_OPERATIONS = {
    "read": AclOperation.READ, "write": AclOperation.WRITE, "create": AclOperation.CREATE,
    "delete": AclOperation.DELETE, "alter": AclOperation.ALTER, "describe": AclOperation.DESCRIBE,
    "clusteraction": AclOperation.CLUSTER_ACTION, "describeconfigs": AclOperation.DESCRIBE_CONFIGS,
    "alterconfigs": AclOperation.ALTER_CONFIGS, "idempotentwrite": AclOperation.IDEMPOTENT_WRITE,
    "createtokens": AclOperation.CREATE_TOKENS, "describetokens": AclOperation.DESCRIBE_TOKENS,
    "all": AclOperation.ALL,
}
_PATTERNS = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED,
             "any": PatternType.ANY, "match": PatternType.MATCH}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `acls` and its subcommands to the top-level parser."""
    parser = subparsers.add_parser("acls", help="add, list and remove ACLs (as kafka-acls)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, handler, text in (("add", add, "add ACLs"), ("list", list_acls, "list ACLs matching the options"),
                                ("remove", remove, "remove the ACLs matching the options")):
        parser = add_action(actions, name, handler, text)
        _add_options(add_output_option(parser) if name == "list" else parser, name)


def _add_options(parser: argparse.ArgumentParser, action: str) -> None:
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic (repeatable)")
    parser.add_argument("--group", action="append", default=[], metavar="GROUP", help="a group (repeatable)")
    parser.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                        help="a transactional id (repeatable)")
    parser.add_argument("--user-principal", action="append", default=[], metavar="User:NAME",
                        help="a user, as the resource of CreateTokens and DescribeTokens (repeatable)")
    parser.add_argument("--delegation-token", action="append", default=[], metavar="TOKEN_ID",
                        help="a delegation token, by its id (repeatable)")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", choices=sorted(_PATTERNS),
                        default="literal" if action == "add" else "any",
                        help="how resource names match (add: literal or prefixed; list/remove also any, match)")
    parser.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                        help="list/remove: only ACLs of this principal (repeatable)")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--operation", action="append", default=[], type=_operation, metavar="OP",
                        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                             "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens or All (repeatable)")
    parser.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    parser.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs (needs --group)")
    parser.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    if action == "remove":
        parser.add_argument("--force", action="store_true", help="remove without asking")


def _operation(text: str) -> AclOperation:
    op = _OPERATIONS.get(text.replace("_", "").replace("-", "").lower())
    if op is None:
        raise argparse.ArgumentTypeError(f"unknown operation {text!r}")
    return op


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    resources = [(ResourceType.TOPIC, t) for t in args.topic] + [(ResourceType.GROUP, g) for g in args.group]
    resources += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    resources += [(ResourceType.USER, u) for u in args.user_principal]
    resources += [(ResourceType.DELEGATION_TOKEN, t) for t in args.delegation_token]
    if args.cluster or (args.producer and args.idempotent):
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return resources


def _operations_for(args: argparse.Namespace, resource_type: ResourceType) -> list[AclOperation]:
    """The operations to grant on a resource: --operation's for all, plus those of --producer/--consumer."""
    ops: list[AclOperation] = list(args.operation) if not (args.producer or args.consumer) else []
    if args.producer:
        ops += {ResourceType.TOPIC: [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE],
                ResourceType.TRANSACTIONAL_ID: [AclOperation.WRITE, AclOperation.DESCRIBE],
                ResourceType.CLUSTER: [AclOperation.IDEMPOTENT_WRITE] if args.idempotent else []
                }.get(resource_type, [])
    if args.consumer:
        ops += {ResourceType.TOPIC: [AclOperation.READ, AclOperation.DESCRIBE],
                ResourceType.GROUP: [AclOperation.READ]}.get(resource_type, [])
    return list(dict.fromkeys(ops))


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    if args.consumer and not args.group:
        raise CliError("--consumer needs --group")
    if (args.producer or args.consumer) and not args.topic:
        raise CliError("--producer and --consumer need --topic")
    if not (args.allow_principal or args.deny_principal):
        raise CliError("give --allow-principal or --deny-principal")
    if args.resource_pattern_type not in ("literal", "prefixed"):
        raise CliError("ACLs are added with --resource-pattern-type literal or prefixed")
    resources = _resources(args)
    if not resources:
        raise CliError("give a resource: --topic, --group, --transactional-id, --user-principal, "
                       "--delegation-token or --cluster")
    pattern = _PATTERNS[args.resource_pattern_type]
    grants = [(AclPermissionType.ALLOW, p, args.allow_host or ["*"]) for p in args.allow_principal]
    grants += [(AclPermissionType.DENY, p, args.deny_host or ["*"]) for p in args.deny_principal]
    bindings = []
    for resource_type, name in resources:
        ops = _operations_for(args, resource_type)
        if not ops and not (args.producer or args.consumer):
            raise CliError("give --operation, --producer or --consumer")
        resource_pattern = PatternType.LITERAL if resource_type == ResourceType.CLUSTER else pattern
        bindings += [AclBinding(resource_type, name, resource_pattern, principal, host, op, permission)
                     for permission, principal, hosts in grants for host in hosts for op in ops]
    return bindings


def _filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    pattern = _PATTERNS[args.resource_pattern_type]
    resources: list[tuple[ResourceType, str | None]] = list(_resources(args)) or [(ResourceType.ANY, None)]
    principals: list[str | None] = [*args.principal, *args.allow_principal, *args.deny_principal] or [None]
    permissions = ([AclPermissionType.ALLOW] if args.allow_principal and not args.deny_principal else
                   [AclPermissionType.DENY] if args.deny_principal and not args.allow_principal else
                   [AclPermissionType.ANY])
    hosts: list[str | None] = [*args.allow_host, *args.deny_host] or [None]
    filters = []
    for resource_type, name in resources:
        ops = _operations_for(args, resource_type) if resource_type != ResourceType.ANY else list(args.operation)
        for op in ops or [AclOperation.ANY]:
            resource_pattern = PatternType.LITERAL if resource_type == ResourceType.CLUSTER else pattern
            filters += [AclBindingFilter(resource_type, name, resource_pattern, principal, host, op, permission)
                        for principal in principals for host in hosts for permission in permissions]
    return filters


def add(args: argparse.Namespace) -> int:
    bindings = _bindings(args)
    response = call(args.bootstrap_server, wire.create_request(bindings))
    for binding, result in zip(bindings, response.results, strict=True):
        check(result.error_code, result.error_message, f"cannot add {format_binding(binding)}")
    print(f"Added {len(bindings)} ACL{'s' if len(bindings) != 1 else ''}:")
    _print(bindings)
    return 0


def list_acls(args: argparse.Namespace) -> int:
    found: dict[tuple[Any, ...], AclBinding] = {}
    for acl_filter in _filters(args):
        response = call(args.bootstrap_server, wire.describe_request(acl_filter))
        check(response.error_code, response.error_message, "cannot list ACLs")
        found.update((_key(b), b) for b in wire.described(response))
    bindings = sorted(found.values(), key=_key)
    emit(args, [_binding_data(b) for b in bindings], lambda: _text(bindings))
    return 0


def remove(args: argparse.Namespace) -> int:
    filters = _filters(args)
    if not args.force:
        if not sys.stdin.isatty():
            raise CliError("removing ACLs needs --force when not run interactively")
        answer = input("Remove the ACLs matching these options? (y/n) ")
        if answer.strip().lower() not in ("y", "yes"):
            return 1
    response = call(args.bootstrap_server, wire.delete_request(filters))
    removed: dict[tuple[Any, ...], AclBinding] = {}
    for result in response.filter_results:
        check(result.error_code, result.error_message, "cannot remove ACLs")
        removed.update((_key(b), b) for b in wire.deleted(result))
    print(f"Removed {len(removed)} ACL{'s' if len(removed) != 1 else ''}:")
    _print(removed.values())
    return 0


def _key(b: AclBinding) -> tuple[Any, ...]:
    return (b.resource_type.name, b.resource_name, b.pattern_type.name, b.principal, b.host, b.operation.name,
            b.permission.name)


def format_binding(b: AclBinding) -> str:
    return (f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission.name})")


def _binding_data(b: AclBinding) -> dict[str, str]:
    return {"resource_type": b.resource_type.name, "resource_name": b.resource_name,
            "pattern_type": b.pattern_type.name, "principal": b.principal, "host": b.host,
            "operation": b.operation.name, "permission_type": b.permission.name}


def _print(bindings: Iterable[AclBinding]) -> None:
    text = _text(bindings)
    if text:
        print(text)


def _text(bindings: Iterable[AclBinding]) -> str:
    """Grouped by resource, as kafka-acls prints them."""
    lines: list[str] = []
    by_resource: dict[tuple[str, str, str], list[AclBinding]] = {}
    for b in bindings:
        by_resource.setdefault((b.resource_type.name, b.resource_name, b.pattern_type.name), []).append(b)
    for (resource_type, name, pattern), acls in sorted(by_resource.items()):
        lines.append(f"Current ACLs for resource `ResourcePattern(resourceType={resource_type}, name={name}, "
                     f"patternType={pattern})`:")
        lines += [f" \t{format_binding(b)}" for b in sorted(acls, key=_key)]
        lines.append("")
    return "\n".join(lines)
