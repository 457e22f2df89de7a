"""`moldau delegation-tokens`: create, renew, expire and describe delegation tokens (KIP-48), as
kafka-delegation-tokens does.

    moldau delegation-tokens create [--max-life-time-period MS] [--renewer-principal User:NAME ...]
                                    [--owner-principal User:NAME]
    moldau delegation-tokens renew --hmac HMAC [--renew-time-period MS]
    moldau delegation-tokens expire --hmac HMAC [--expiry-time-period MS]
    moldau delegation-tokens describe [--owner-principal User:NAME ...]

Token requests need an authenticated connection (SASL, or TLS with a client certificate): give its settings with
`--command-config`. HMACs are printed and taken in base64, as Kafka's tool does. A client then logs in with SCRAM,
the token id as username, the HMAC as password and `tokenauth="true"` in its ScramLoginModule JAAS config.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime
from datetime import timedelta
from typing import Any

from kio.schema.create_delegation_token.v3.request import CreatableRenewers, CreateDelegationTokenRequest
from kio.schema.describe_delegation_token.v3.request import (
    DescribeDelegationTokenOwner,
    DescribeDelegationTokenRequest,
)
from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest
from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest
from kio.static.primitive import i64Timedelta

from moldau.cli.common import CliError, add_action
from moldau.cli.output import add_output_option, emit_table
from moldau.cli.raw_request import call, check
from moldau.security.principal import KafkaPrincipal

# What each refusal means, for the error line (the broker's answers carry only the code).
_HINTS = {
    61: "delegation tokens are off on this cluster: it has no delegation.token.secret.key",
    62: "no token has this HMAC",
    63: "only the token's owner and its renewers may do this",
    64: "token requests need a connection authenticated with SASL or a TLS client certificate, not with a token "
        "(give --command-config)",
    65: "creating a token for another owner needs CREATE_TOKENS on that User resource",
    66: "the token has expired",
    67: "renewers must be User principals",
}
HEADERS = ["TOKEN-ID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUE-DATE", "EXPIRY-DATE", "MAX-DATE"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("delegation-tokens", help="create, renew, expire and describe delegation tokens")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = add_output_option(add_action(actions, "create", run_create, "create a delegation token"))
    create.add_argument("--max-life-time-period", type=int, default=-1, metavar="MS",
                        help="the token's longest life in ms (default: the broker's delegation.token.max.lifetime.ms)")
    create.add_argument("--renewer-principal", action="append", default=[], metavar="User:NAME",
                        help="a principal that may renew the token; repeat for several")
    create.add_argument("--owner-principal", metavar="User:NAME",
                        help="create the token for another owner (needs CREATE_TOKENS on that user)")
    renew = add_output_option(add_action(actions, "renew", run_renew, "renew a delegation token"))
    renew.add_argument("--hmac", required=True, help="the token's HMAC, in base64")
    renew.add_argument("--renew-time-period", type=int, default=-1, metavar="MS",
                       help="the new expiry, this long from now (default: delegation.token.expiry.time.ms)")
    expire = add_output_option(add_action(actions, "expire", run_expire, "expire a delegation token"))
    expire.add_argument("--hmac", required=True, help="the token's HMAC, in base64")
    expire.add_argument("--expiry-time-period", type=int, default=-1, metavar="MS",
                        help="expire the token this long from now; negative (the default): at once")
    describe = add_output_option(add_action(actions, "describe", run_describe,
                                            "the delegation tokens this principal may see"))
    describe.add_argument("--owner-principal", action="append", default=[], metavar="User:NAME",
                          help="only tokens of this owner; repeat for several")


def run_create(args: argparse.Namespace) -> int:
    owner = _principal(args.owner_principal) if args.owner_principal else None
    renewers = tuple(CreatableRenewers(principal_type=p.principal_type, principal_name=p.name)
                     for p in map(_principal, args.renewer_principal))
    response = call(args.bootstrap_server, CreateDelegationTokenRequest(
        owner_principal_type=owner.principal_type if owner else None,
        owner_principal_name=owner.name if owner else None, renewers=renewers,
        max_lifetime=i64Timedelta.parse(timedelta(milliseconds=args.max_life_time_period))))
    _check(response.error_code)
    emit_table(args, [(response.token_id, _b64(response.hmac),
                       f"{response.principal_type}:{response.principal_name}",
                       f"{response.token_requester_principal_type}:{response.token_requester_principal_name}",
                       ",".join(str(_principal(p)) for p in args.renewer_principal),
                       _date(response.issue_timestamp), _date(response.expiry_timestamp),
                       _date(response.max_timestamp))], HEADERS)
    return 0


def run_renew(args: argparse.Namespace) -> int:
    response = call(args.bootstrap_server, RenewDelegationTokenRequest(
        hmac=_hmac(args.hmac), renew_period=i64Timedelta.parse(timedelta(milliseconds=args.renew_time_period))))
    _check(response.error_code)
    emit_table(args, [(_date(response.expiry_timestamp),)], ["EXPIRY-DATE"])
    return 0


def run_expire(args: argparse.Namespace) -> int:
    response = call(args.bootstrap_server, ExpireDelegationTokenRequest(
        hmac=_hmac(args.hmac),
        expiry_time_period=i64Timedelta.parse(timedelta(milliseconds=args.expiry_time_period))))
    _check(response.error_code)
    emit_table(args, [(_date(response.expiry_timestamp),)], ["EXPIRY-DATE"])
    return 0


def run_describe(args: argparse.Namespace) -> int:
    owners = tuple(DescribeDelegationTokenOwner(principal_type=p.principal_type, principal_name=p.name)
                   for p in map(_principal, args.owner_principal)) or None
    response = call(args.bootstrap_server, DescribeDelegationTokenRequest(owners=owners))
    _check(response.error_code)
    rows = [(t.token_id, _b64(t.hmac), f"{t.principal_type}:{t.principal_name}",
             f"{t.token_requester_principal_type}:{t.token_requester_principal_name}",
             ",".join(f"{r.principal_type}:{r.principal_name}" for r in t.renewers),
             _date_ms(t.issue_timestamp), _date_ms(t.expiry_timestamp), _date_ms(t.max_timestamp))
            for t in response.tokens]
    emit_table(args, rows, HEADERS, empty="no delegation tokens")
    return 0


def _check(code: Any) -> None:
    check(code, _HINTS.get(int(code)))


def _principal(text: str) -> KafkaPrincipal:
    try:
        return KafkaPrincipal.parse(text)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _hmac(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CliError(f"--hmac {text!r} is not base64 (the HMAC as `delegation-tokens create` prints it)") from None


def _b64(data: Any) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def _date(value: datetime.datetime) -> str:
    return value.astimezone(datetime.UTC).isoformat(timespec="milliseconds")


def _date_ms(timestamp_ms: int) -> str:
    return _date(datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC))
