"""`moldau schemas`: register, list, read, delete and check schemas in the schema registry, and set its
compatibility level and mode.

Every command is one or two requests to the registry's REST API (Confluent's, see docs/registry.md), at
`--registry URL` (default: $MOLDAU_SCHEMA_REGISTRY, else the broker's default listener, http://127.0.0.1:8081).
Schemas are read from a file or stdin; the format is `--type`, else guessed from the file's extension
(`.avsc` Avro, `.json` JSON Schema, `.proto` Protobuf), else Avro, the registry's default.
"""

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from moldau.cli.common import CliError, add_action
from moldau.cli.format_options import add_registry_ca_option, registry_access
from moldau.cli.output import add_output_option, emit, wants_json
from moldau.registry.rest_client import DEFAULT_URL, RegistryClient, RegistryError, subject_path
from moldau.text import ascii_digits

REGISTRY_ENV = "MOLDAU_SCHEMA_REGISTRY"
TYPES = ("AVRO", "JSON", "PROTOBUF")
EXTENSIONS = {".avsc": "AVRO", ".avro": "AVRO", ".json": "JSON", ".proto": "PROTOBUF"}
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
MODES = ("READWRITE", "READONLY", "IMPORT")


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `schemas` and its subcommands to the top-level parser."""
    parser = subparsers.add_parser("schemas", help="manage schemas in the schema registry")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    new = _action(actions, "register", run_register, "register a schema under a subject (prints its id)")
    _schema_arguments(new)
    new.add_argument("--normalize", action="store_true", help="normalize the schema before registering it")

    listing = add_output_option(_action(actions, "list", run_list, "list subjects, or the versions of one subject"))
    listing.add_argument("subject", nargs="?", metavar="SUBJECT", help="list this subject's versions")
    listing.add_argument("--deleted", action="store_true", help="include soft-deleted subjects or versions")
    listing.add_argument("--prefix", metavar="PREFIX", help="only subjects starting with PREFIX")

    get = add_output_option(_action(actions, "get", run_get,
                                    "print a schema: a subject's version (default latest), or by id"))
    get.add_argument("subject", nargs="?", metavar="SUBJECT")
    get.add_argument("--version", default="latest", metavar="V", help="version number or 'latest'")
    get.add_argument("--id", type=int, metavar="ID", help="the schema with this id (instead of a subject)")
    get.add_argument("--json", action="store_true", help="print the registry's whole answer as JSON (as --output json)")

    delete = _action(actions, "delete", run_delete, "delete a subject or one version (soft, or --permanent)")
    delete.add_argument("subject", metavar="SUBJECT")
    delete.add_argument("--version", metavar="V", help="only this version ('latest' allowed)")
    delete.add_argument("--permanent", action="store_true", help="hard delete (after a soft delete)")

    check = _action(actions, "check", run_check, "test a schema's compatibility with a subject (exit 1 if not)")
    _schema_arguments(check)
    check.add_argument("--version", metavar="V",
                       help="only against this version (default: the versions the subject's level names)")

    config = add_output_option(_action(actions, "config", run_config,
                                       "show or set the compatibility level (global or a subject's)"))
    config.add_argument("subject", nargs="?", metavar="SUBJECT")
    config.add_argument("--set", choices=LEVELS, metavar="LEVEL", help=f"set it: {', '.join(LEVELS)}")
    config.add_argument("--delete", action="store_true", help="remove the subject's own level (back to global)")

    mode = add_output_option(_action(actions, "mode", run_mode, "show or set the mode (global or a subject's)"))
    mode.add_argument("subject", nargs="?", metavar="SUBJECT")
    mode.add_argument("--set", choices=MODES, metavar="MODE", help=f"set it: {', '.join(MODES)}")
    mode.add_argument("--force", action="store_true", help="IMPORT even when schemas exist")
    mode.add_argument("--delete", action="store_true", help="remove the subject's own mode (back to global)")


def _action(actions: Any, name: str, handler: Any, text: str) -> argparse.ArgumentParser:
    parser = add_action(actions, name, handler, text)
    parser.add_argument("--registry", "-r", default=os.environ.get(REGISTRY_ENV) or DEFAULT_URL, metavar="URL",
                        help=f"schema registry URL (default: ${REGISTRY_ENV} or {DEFAULT_URL}); "
                             "https://user:password@host:port for an authenticating registry")
    add_registry_ca_option(parser)
    return parser


def _schema_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("subject", metavar="SUBJECT")
    parser.add_argument("file", nargs="?", default="-", metavar="FILE", help="the schema (default: stdin)")
    parser.add_argument("--type", choices=TYPES, type=str.upper, help="schema format (default: by extension)")
    parser.add_argument("--reference", action="append", default=[], metavar="NAME=SUBJECT:VERSION",
                        help="a schema this one references (repeatable)")


def _client(args: argparse.Namespace) -> RegistryClient:
    return registry_access(args).client()


def _call(what: str, request: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return request(*args, **kwargs)
    except RegistryError as exc:
        raise CliError(f"{what}: {exc}") from None


def schema_body(args: argparse.Namespace) -> dict[str, Any]:
    """The register / check request body from the file (or stdin), `--type` and `--reference`s."""
    if args.file == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(args.file).read_text()
        except OSError as exc:
            raise CliError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    schema_type = args.type or EXTENSIONS.get(Path(args.file).suffix.lower(), "AVRO")
    body: dict[str, Any] = {"schema": text}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    if args.reference:
        body["references"] = [_reference(r) for r in args.reference]
    return body


def _reference(text: str) -> dict[str, Any]:
    name, sep, target = text.partition("=")
    subject, colon, version = target.rpartition(":")
    if not (sep and colon and name and subject and ascii_digits(version)):
        raise CliError(f"--reference {text!r}: expected NAME=SUBJECT:VERSION, e.g. com.acme.Address=address:1")
    return {"name": name, "subject": subject, "version": int(version)}


def run_register(args: argparse.Namespace) -> int:
    client = _client(args)
    body = schema_body(args)
    registered = _call("cannot register", client.post, subject_path(args.subject, "versions"), body,
                       normalize=args.normalize or None)
    found = _call("registered, but cannot look it up", client.post, subject_path(args.subject), body,
                  normalize=args.normalize or None)
    print(f"registered under {args.subject} as version {found['version']}, id {registered['id']}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.subject is None:
        subjects = _call("cannot list subjects", client.get, "/subjects", deleted=args.deleted or None,
                         subjectPrefix=args.prefix)
        emit(args, subjects, lambda: "\n".join(subjects))
        return 0
    versions = _call("cannot list versions", client.get, subject_path(args.subject, "versions"),
                     deleted=args.deleted or None)
    emit(args, versions, lambda: "\n".join(map(str, versions)))
    return 0


def run_get(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.id is not None:
        answer = _call(f"cannot get schema {args.id}", client.get, f"/schemas/ids/{args.id}")
    elif args.subject is not None:
        answer = _call(f"cannot get {args.subject} version {args.version}", client.get,
                       subject_path(args.subject, "versions", str(args.version)))
    else:
        raise CliError("name a SUBJECT (with --version) or give --id ID")
    print(json.dumps(answer, indent=2) if args.json or wants_json(args) else answer["schema"])
    return 0


def run_delete(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.version is None:
        deleted = _call(f"cannot delete {args.subject}", client.delete, subject_path(args.subject),
                        permanent=args.permanent or None)
        versions = ", ".join(str(v) for v in deleted)
    else:
        versions = str(_call(f"cannot delete {args.subject} version {args.version}", client.delete,
                             subject_path(args.subject, "versions", args.version), permanent=args.permanent or None))
    kind = "permanently deleted" if args.permanent else "deleted"
    print(f"{kind} {args.subject} version{'s' if ',' in versions else ''} {versions}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    client = _client(args)
    path = ("versions" if args.version is None else f"versions/{args.version}")
    answer = _call(f"cannot check against {args.subject}", client.post,
                   "/compatibility" + subject_path(args.subject, path), schema_body(args), verbose=True)
    if answer.get("is_compatible"):
        print(f"compatible with {args.subject}")
        return 0
    print(f"incompatible with {args.subject}:")
    for message in answer.get("messages") or ():
        print(f"  {message}")
    return 1


def run_config(args: argparse.Namespace) -> int:
    client = _client(args)
    path = "/config" if args.subject is None else f"/config/{_quoted(args.subject)}"
    if args.set is not None:
        answer = _call("cannot set the compatibility level", client.put, path, {"compatibility": args.set})
        print(answer["compatibility"])
    elif args.delete:
        answer = _call("cannot delete the compatibility level", client.delete, path)
        print(f"removed {args.subject or 'global'} level {answer.get('compatibilityLevel', '')}".rstrip())
    else:
        answer = _call("cannot get the compatibility level", client.get, path,
                       defaultToGlobal=True if args.subject else None)
        emit(args, answer, lambda: str(answer["compatibilityLevel"]))  # json: the registry's own answer
    return 0


def run_mode(args: argparse.Namespace) -> int:
    client = _client(args)
    path = "/mode" if args.subject is None else f"/mode/{_quoted(args.subject)}"
    if args.set is not None:
        answer = _call("cannot set the mode", client.put, path, {"mode": args.set}, force=args.force or None)
    elif args.delete:
        answer = _call("cannot delete the mode", client.delete, path)
    else:
        answer = _call("cannot get the mode", client.get, path, defaultToGlobal=True if args.subject else None)
        emit(args, answer, lambda: str(answer["mode"]))  # json: the registry's own answer
        return 0
    print(answer["mode"])
    return 0


def _quoted(subject: str) -> str:
    return subject_path(subject).removeprefix("/subjects/")
