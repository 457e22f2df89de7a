"""`moldau users`: create, list, delete SCRAM users and change their passwords.

The equivalent of Kafka's `kafka-configs --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'
--entity-type users --entity-name alice` (and `--delete-config`, `--describe`), through confluent-kafka's
AdminClient: AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554). The client salts and hashes
the password; the broker only ever sees and stores the salted form. `--command-config FILE` takes a Kafka client
properties file (security.protocol, sasl.mechanism, sasl.username, ...) for secured brokers.
"""

import argparse
import getpass
import sys
from typing import Any

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from moldau.cli.common import (
    REQUEST_TIMEOUT_S,
    CliError,
    add_action,
    check_reachable,
    client_config,
    error_name,
    kafka_error,
    request_failed,
)
from moldau.cli.output import add_output_option, emit_table, wants_json

MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
NAMES = {v: k for k, v in MECHANISMS.items()}
DEFAULT_ITERATIONS = 4096  # Kafka's default for kafka-configs


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `users` and its subcommands to the top-level parser."""
    parser = subparsers.add_parser("users", help="create, list and delete SCRAM users, change their passwords")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = _action(actions, "create", run_create, "create a SCRAM user (fails if it has that mechanism already)")
    _credential_options(create)
    add_output_option(_action(actions, "list", run_list, "list SCRAM users and their mechanisms")).add_argument(
        "names", nargs="*", metavar="NAME", help="users to list (default: all)")
    delete = _action(actions, "delete", run_delete, "delete a SCRAM user's credentials")
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("--mechanism", choices=sorted(MECHANISMS), action="append",
                        help="only this mechanism's credential (repeatable; default: every mechanism it has)")
    change = _action(actions, "change-password", run_change_password, "set a new password for an existing user")
    _credential_options(change)


def _action(actions: Any, name: str, handler: Any, text: str) -> argparse.ArgumentParser:
    return add_action(actions, name, handler, text)  # with --bootstrap-server and --command-config


def _credential_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME")
    parser.add_argument("--mechanism", choices=sorted(MECHANISMS), action="append",
                        help="SCRAM mechanism (repeatable; default: SCRAM-SHA-256)")
    parser.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                        help=f"PBKDF2 iterations, 4096 to 16384 (default: {DEFAULT_ITERATIONS})")
    parser.add_argument("--password", help="the password (default: prompt for it; avoid it on shared machines)")


def admin_client(args: argparse.Namespace) -> AdminClient:
    check_reachable(args.bootstrap_server)
    return AdminClient(client_config(args.bootstrap_server))  # client_config adds --command-config's settings


def _password(args: argparse.Namespace) -> str:
    if args.password is not None:
        return str(args.password)
    first = getpass.getpass(f"Password for {args.name}: ")
    if getpass.getpass("Again: ") != first:
        raise CliError("the passwords differ")
    if not first:
        raise CliError("empty password")
    return first


def _described(admin: AdminClient, names: list[str] | None) -> dict[str, list[tuple[str, int]]]:
    """user -> [(mechanism, iterations)]; users without credentials are left out."""
    try:
        if names is None:
            every: Any = admin.describe_user_scram_credentials(request_timeout=REQUEST_TIMEOUT_S)
            descriptions = every.result(timeout=REQUEST_TIMEOUT_S + 5)
        else:
            descriptions = {}
            futures: Any = admin.describe_user_scram_credentials(names, request_timeout=REQUEST_TIMEOUT_S)
            for name, future in futures.items():
                try:
                    descriptions[name] = future.result(timeout=REQUEST_TIMEOUT_S + 5)
                except Exception as exc:
                    err = kafka_error(exc)
                    if err is None or error_name(err) != "RESOURCE_NOT_FOUND":
                        raise
    except Exception as exc:
        raise request_failed(exc, "cannot describe SCRAM users") from exc
    return {user: sorted((NAMES.get(i.mechanism, str(i.mechanism)), i.iterations)
                         for i in description.scram_credential_infos)
            for user, description in descriptions.items()}


def _alter(admin: AdminClient, name: str, alterations: list[Any], what: str) -> None:
    futures = admin.alter_user_scram_credentials(alterations, request_timeout=REQUEST_TIMEOUT_S)
    try:
        futures[name].result(timeout=REQUEST_TIMEOUT_S + 5)
    except Exception as exc:
        raise request_failed(exc, f"cannot {what} '{name}'") from exc


def _upsert(args: argparse.Namespace, must_exist: bool) -> int:
    mechanisms = list(dict.fromkeys(args.mechanism or ["SCRAM-SHA-256"]))
    admin = admin_client(args)
    have = {m for m, _ in _described(admin, [args.name]).get(args.name, [])}
    for mechanism in mechanisms:
        if must_exist and mechanism not in have:
            raise CliError(f"user '{args.name}' has no {mechanism} credential; create it first")
        if not must_exist and mechanism in have:
            raise CliError(f"user '{args.name}' already has a {mechanism} credential; use change-password")
    password = _password(args).encode()
    _alter(admin, args.name, [
        UserScramCredentialUpsertion(args.name, ScramCredentialInfo(MECHANISMS[m], args.iterations), password)
        for m in mechanisms], "change the password of" if must_exist else "create user")
    verb = "changed the password of" if must_exist else "created"
    print(f"{verb} user '{args.name}' ({', '.join(mechanisms)}, {args.iterations} iterations)")
    return 0


def run_create(args: argparse.Namespace) -> int:
    return _upsert(args, must_exist=False)


def run_change_password(args: argparse.Namespace) -> int:
    return _upsert(args, must_exist=True)


def run_list(args: argparse.Namespace) -> int:
    names = list(dict.fromkeys(args.names)) or None
    described = _described(admin_client(args), names)
    missing = [n for n in names or () if n not in described]
    rows = [[user, mechanism, iterations] for user in sorted(described) for mechanism, iterations in described[user]]
    if rows or wants_json(args):
        emit_table(args, rows, ["USER", "MECHANISM", "ITERATIONS"])
    for name in missing:
        print(f"error: user '{name}' has no SCRAM credentials", file=sys.stderr)
    return 1 if missing else 0


def run_delete(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    have = [m for m, _ in _described(admin, [args.name]).get(args.name, [])]
    mechanisms = list(dict.fromkeys(args.mechanism or have))
    if not mechanisms or any(m not in have for m in mechanisms):
        raise CliError(f"user '{args.name}' has no {' or '.join(mechanisms) or 'SCRAM'} credential")
    _alter(admin, args.name, [UserScramCredentialDeletion(args.name, MECHANISMS[m]) for m in mechanisms],
           "delete user")
    print(f"deleted {', '.join(mechanisms)} credential{'s' if len(mechanisms) > 1 else ''} of user '{args.name}'")
    return 0
