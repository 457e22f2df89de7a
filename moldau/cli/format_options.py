"""The options of `--key-format` / `--value-format` (`moldau produce`, `consume`, `share consume`) and of the schema
registry they use, parsed without loading the serializers: `serde.py` holds those, imported only by runs that ask
for a format (confluent-kafka's registry client and Protobuf take about half a second to import)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.serialization import MessageField

from moldau.cli.common import CliError
from moldau.registry.rest_client import DEFAULT_URL, RegistryAccess

__all__ = ["FORMATS", "Deserialize", "FieldFormat", "Serialize", "add_format_options", "add_registry_ca_option",
           "format_specs", "registry_access"]

FORMATS = ("avro", "json", "protobuf")
Serialize = Callable[[bytes], bytes]  # input line -> record bytes
Deserialize = Callable[[bytes, str], bytes]  # (record bytes, topic) -> JSON text
REGISTRY_ENV = "MOLDAU_SCHEMA_REGISTRY"
REGISTRY_CA_ENV = "MOLDAU_SCHEMA_REGISTRY_CA"


@dataclass(frozen=True, slots=True)
class FieldFormat:
    """How one side of a record (key or value) is written or read."""

    fmt: str  # avro, json or protobuf
    side: str  # "key" or "value"
    schema_file: str | None = None
    schema_id: int | None = None

    @property
    def field(self) -> MessageField:
        return MessageField.KEY if self.side == "key" else MessageField.VALUE


def add_format_options(parser: argparse.ArgumentParser, producing: bool) -> None:
    """`--key-format`, `--value-format` and `--registry`; for producing also the schema to write with."""
    verb = "written" if producing else "shown"
    for side in ("key", "value"):
        parser.add_argument(f"--{side}-format", choices=FORMATS, type=str.lower,
                            help=f"{side}s in the schema registry's wire format, {verb} as JSON")
        if producing:
            parser.add_argument(f"--{side}-schema", metavar="FILE",
                                help=f"the {side} schema (registered under TOPIC-{side} if new; default: that "
                                     "subject's latest version)")
            parser.add_argument(f"--{side}-schema-id", type=int, metavar="ID", help=f"the {side} schema's id")
    parser.add_argument("--registry", default=os.environ.get(REGISTRY_ENV) or DEFAULT_URL, metavar="URL",
                        help=f"schema registry URL for the formats (default: ${REGISTRY_ENV} or {DEFAULT_URL}); "
                             "https://user:password@host:port for an authenticating registry")
    add_registry_ca_option(parser)


def add_registry_ca_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--registry-ca", default=os.environ.get(REGISTRY_CA_ENV), metavar="FILE",
                        help=f"PEM file of the CA that signs an https registry's certificate (default: "
                             f"${REGISTRY_CA_ENV}, else the system's CAs)")


def registry_access(args: argparse.Namespace) -> RegistryAccess:
    return RegistryAccess(args.registry, args.registry_ca)


def format_specs(args: argparse.Namespace) -> tuple[FieldFormat | None, FieldFormat | None]:
    """The key's and the value's FieldFormat from the parsed options (None where no format is given)."""
    specs: list[FieldFormat | None] = []
    for side in ("key", "value"):
        fmt = getattr(args, f"{side}_format")
        schema_file, schema_id = getattr(args, f"{side}_schema", None), getattr(args, f"{side}_schema_id", None)
        if fmt is None and (schema_file is not None or schema_id is not None):
            raise CliError(f"--{side}-schema and --{side}-schema-id need --{side}-format")
        if schema_file is not None and schema_id is not None:
            raise CliError(f"give --{side}-schema or --{side}-schema-id, not both")
        specs.append(None if fmt is None else FieldFormat(fmt, side, schema_file, schema_id))
    return specs[0], specs[1]
