"""`moldau quotas`: describe, alter and delete client quotas, with kafka-configs' quota options.

    moldau quotas alter -b HOST:PORT --entity-type clients --entity-name app \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    moldau quotas alter --entity-type users --entity-default --delete-config producer_byte_rate
    moldau quotas describe [--entity-type users --entity-name alice [--entity-type clients ...]]
    moldau quotas delete --entity-type clients --entity-name app
    moldau quotas alter --ip 10.0.0.7 --add-config connection_creation_rate=10

Entities are named as kafka-configs names them: `--entity-type users|clients` followed by `--entity-name NAME`
or `--entity-default`, once or twice (a user and a client id), or the shortcuts `--user NAME`, `--client NAME`,
`--user-defaults`, `--client-defaults`; an IP address (KIP-612's connection creation rate) with `--entity-type
ips`, `--ip ADDRESS` or `--ip-defaults`.

Neither confluent-kafka's nor kafka-python's admin client has the client quota APIs, so this tool sends
DescribeClientQuotas and AlterClientQuotas (KIP-546) with Moldau's own protocol client
(`moldau.net.client`). `--command-config FILE` (a Kafka client properties file, as for every client tool) gives
its `client.id` and TLS settings.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, OpData
from kio.schema.alter_client_quotas.v1.request import EntityData as AlterEntity
from kio.schema.alter_client_quotas.v1.request import EntryData as AlterEntry
from kio.schema.describe_client_quotas.v1.request import ComponentData, DescribeClientQuotasRequest
from kio.static.primitive import f64, i8

from moldau.cli import raw_request
from moldau.cli.common import CliError, add_action
from moldau.cli.output import add_output_option, emit
from moldau.cli.table import format_table

# kafka-configs' entity types -> the client quota entity types of the protocol.
ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_SHORTCUTS = {"--user": "user", "--client": "client-id", "--ip": "ip"}
_DEFAULTS = {"--user-defaults": "user", "--client-defaults": "client-id", "--ip-defaults": "ip"}
DEFAULT_NAME = "<default>"
MATCH_EXACT, MATCH_DEFAULT = 0, 1

Entity = list[tuple[str, str | None]]  # (protocol entity type, name or None for the default)


class _EntityAction(argparse.Action):
    """Collects --entity-type / --entity-name / --entity-default (and the shortcuts) in order, as pairs."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        entities: list[list[Any]] = list(getattr(namespace, "entities", None) or [])
        if option_string == "--entity-type":
            if values not in ENTITY_TYPES:
                raise argparse.ArgumentError(self, f"entity type is users, clients or ips, not {values!r}")
            entities.append([ENTITY_TYPES[values], ...])
        elif option_string in ("--entity-name", "--entity-default"):
            if not entities or entities[-1][1] is not ...:
                raise argparse.ArgumentError(self, "give --entity-type before each --entity-name/--entity-default")
            entities[-1][1] = None if option_string == "--entity-default" else values
        elif option_string in _SHORTCUTS:
            entities.append([_SHORTCUTS[option_string], values])
        else:
            entities.append([_DEFAULTS[option_string or ""], None])
        namespace.entities = entities


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("quotas", help="describe, alter and delete client quotas")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    describe = add_output_option(add_action(actions, "describe", run_describe,
                                            "list client quotas, of all entities or the ones named"))
    _add_common(describe)
    alter = add_action(actions, "alter", run_alter, "set or remove client quotas of an entity")
    _add_common(alter)
    alter.add_argument("--add-config", metavar="K=V,...", default="",
                       help="quotas to set: producer_byte_rate, consumer_byte_rate, request_percentage, "
                            "controller_mutation_rate; connection_creation_rate for an ip")
    alter.add_argument("--delete-config", metavar="K,...", default="", help="quotas to remove")
    delete = add_action(actions, "delete", run_delete, "remove every client quota of an entity")
    _add_common(delete)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(entities=[])
    parser.add_argument("--entity-type", action=_EntityAction, metavar="users|clients|ips")
    parser.add_argument("--entity-name", action=_EntityAction, metavar="NAME")
    parser.add_argument("--entity-default", action=_EntityAction, nargs=0, help="the default of the entity type")
    parser.add_argument("--user", action=_EntityAction, metavar="NAME", help="same as --entity-type users "
                        "--entity-name NAME")
    parser.add_argument("--client", action=_EntityAction, metavar="NAME", help="same as --entity-type clients "
                        "--entity-name NAME")
    parser.add_argument("--ip", action=_EntityAction, metavar="ADDRESS", help="same as --entity-type ips "
                        "--entity-name ADDRESS")
    parser.add_argument("--user-defaults", action=_EntityAction, nargs=0)
    parser.add_argument("--client-defaults", action=_EntityAction, nargs=0)
    parser.add_argument("--ip-defaults", action=_EntityAction, nargs=0)


def _entity(args: argparse.Namespace, required: bool) -> Entity:
    entity: Entity = []
    for entity_type, name in args.entities:
        if name is ...:
            raise CliError("--entity-type needs --entity-name NAME or --entity-default")
        entity.append((entity_type, name))
    if required and not entity:
        raise CliError("name the entity: --entity-type users|clients|ips with --entity-name NAME or "
                       "--entity-default")
    if len({t for t, _ in entity}) != len(entity):
        raise CliError("name at most one user and one client")
    return entity




def _call(args: argparse.Namespace, request: Any) -> Any:
    return raw_request.call(args.bootstrap_server, request)


def _describe(args: argparse.Namespace, entity: Entity) -> list[tuple[Entity, dict[str, float]]]:
    components = tuple(
        ComponentData(entity_type=t, match_type=i8(MATCH_DEFAULT if n is None else MATCH_EXACT), match=n)
        for t, n in entity)
    response = _call(args, DescribeClientQuotasRequest(components=components, strict=bool(entity)))
    if response.error_code.value != 0:
        raise CliError(f"{response.error_code.name.upper()}: {response.error_message}")
    return [([(e.entity_type, e.entity_name) for e in entry.entity], {v.key: v.value for v in entry.values})
            for entry in response.entries or ()]


def _show(entity: Entity) -> str:
    names = {"user": "user", "client-id": "client", "ip": "ip"}
    ordered = sorted(entity, key=lambda part: part[0] != "user")  # the user first, as kafka-configs says it
    return ", ".join(f"{names.get(t, t)}={DEFAULT_NAME if n is None else n}" for t, n in ordered)


def _number(value: float) -> int | float:
    return int(value) if value == int(value) else value


def run_describe(args: argparse.Namespace) -> int:
    found = _describe(args, _entity(args, required=False))
    rows = [(_show(entity), key, _number(value)) for entity, values in found for key, value in sorted(values.items())]
    document = [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                 "quotas": {k: _number(v) for k, v in sorted(values.items())}} for entity, values in found]
    emit(args, document, lambda: format_table(rows, ["ENTITY", "QUOTA", "VALUE"]) if rows else "no client quotas")
    return 0


def _parse_add(text: str) -> list[tuple[str, float]]:
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        try:
            out.append((key.strip(), float(value)))
        except ValueError:
            raise CliError(f"--add-config takes key=number pairs, not {item!r}") from None
        if not sep:
            raise CliError(f"--add-config takes key=number pairs, not {item!r}")
    return out


def _alter(args: argparse.Namespace, entity: Entity, ops: Sequence[tuple[str, float | None]]) -> None:
    entry = AlterEntry(entity=tuple(AlterEntity(entity_type=t, entity_name=n) for t, n in entity),
                       ops=tuple(OpData(key=k, value=f64(0.0 if v is None else v), remove=v is None) for k, v in ops))
    response = _call(args, AlterClientQuotasRequest(entries=(entry,), validate_only=False))
    for result in response.entries:
        if result.error_code.value != 0:
            raise CliError(f"{result.error_code.name.upper()}: {result.error_message}")


def run_alter(args: argparse.Namespace) -> int:
    entity = _entity(args, required=True)
    ops: list[tuple[str, float | None]] = list(_parse_add(args.add_config))
    ops += [(key.strip(), None) for key in args.delete_config.split(",") if key.strip()]
    if not ops:
        raise CliError("nothing to change: give --add-config and/or --delete-config")
    _alter(args, entity, ops)
    print(f"Completed updating quotas of {_show(entity)}")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    entity = _entity(args, required=True)
    found = _describe(args, entity)
    keys = sorted({key for _, values in found for key in values})
    if not keys:
        raise CliError(f"no client quotas for {_show(entity)}")
    _alter(args, entity, [(key, None) for key in keys])
    print(f"Deleted quotas of {_show(entity)}: {', '.join(keys)}")
    return 0
