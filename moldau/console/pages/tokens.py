"""`/tokens`: the delegation tokens (KIP-48) the signed-in user may see; creating, renewing and expiring them.

confluent-kafka has no delegation token API: the four requests go through Moldau's own client as the user
(moldau.console.native), so the cluster applies that user's rights (owners and renewers renew and expire; creating
for another owner needs CREATE_TOKENS on that user). A token's HMAC, its password, is shown once, on the page that
creates it, and never listed; renewing and expiring name the token by id, and the page looks its HMAC up with
DescribeDelegationToken, which answers only for tokens the user may see. Tokens need a cluster with
`delegation.token.secret.key` and a user signed in with SASL; otherwise the page says which is missing.
"""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

from kio.schema.create_delegation_token.v3.request import CreatableRenewers, CreateDelegationTokenRequest
from kio.schema.describe_delegation_token.v3.request import DescribeDelegationTokenRequest
from kio.schema.errors import ErrorCode
from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest
from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest
from kio.static.primitive import i64Timedelta
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from moldau.console.clients import ConsoleClients
from moldau.console.context import ConsoleContext
from moldau.console.errors import ConsoleError
from moldau.console.forms import form_fields
from moldau.console.native import check_error, send_any
from moldau.security.principal import USER_TYPE, KafkaPrincipal

__all__ = ["TokenRow", "create_token", "list_tokens", "routes"]

# Answers that mean "tokens cannot be used here" rather than a failure: the page explains them.
UNAVAILABLE = {
    ErrorCode.delegation_token_auth_disabled: "Delegation tokens are off on this cluster: it has no "
                                               "delegation.token.secret.key.",
    ErrorCode.delegation_token_request_not_allowed: "Delegation tokens are made over an authenticated connection: "
                                                    "sign in to a cluster that uses SASL.",
}


@dataclass(frozen=True)
class TokenRow:
    token_id: str
    owner: str
    requester: str
    renewers: str
    issued: str
    expires: str
    max_time: str
    hmac: bytes  # kept server-side for renew and expire; never rendered in the list


@dataclass(frozen=True)
class CreatedToken:
    token_id: str
    hmac: str  # base64, as a client logs in with it
    owner: str
    expires: str
    max_time: str


async def list_tokens(clients: ConsoleClients) -> tuple[list[TokenRow], str | None]:
    """The tokens the user may see, or none and why tokens are unavailable."""
    response = await send_any(clients, DescribeDelegationTokenRequest(owners=None))
    if response.error_code in UNAVAILABLE:
        return [], UNAVAILABLE[response.error_code]
    check_error(response.error_code, None)
    rows = [TokenRow(t.token_id, f"{t.principal_type}:{t.principal_name}",
                     f"{t.token_requester_principal_type}:{t.token_requester_principal_name}",
                     ", ".join(f"{r.principal_type}:{r.principal_name}" for r in t.renewers),
                     _time(t.issue_timestamp), _time(t.expiry_timestamp), _time(t.max_timestamp), bytes(t.hmac))
            for t in response.tokens]
    return sorted(rows, key=lambda r: (r.owner, r.issued, r.token_id)), None


async def create_token(clients: ConsoleClients, fields: dict[str, str]) -> CreatedToken:
    """A token from the create form: its lifetime in hours (empty: the cluster's maximum), renewers, and an owner
    other than the user. ConsoleError 400 names a field that is wrong."""
    renewers = tuple(CreatableRenewers(principal_type=p.principal_type, principal_name=p.name)
                     for p in (_principal(text, "renewer") for text in fields.get("renewers", "").split(",")
                               if text.strip()))
    owner = _principal(fields["owner"], "owner") if fields.get("owner", "").strip() else None
    hours = _hours(fields.get("max_lifetime_hours", ""), "max lifetime")
    response = await send_any(clients, CreateDelegationTokenRequest(
        owner_principal_type=owner.principal_type if owner else None,
        owner_principal_name=owner.name if owner else None, renewers=renewers,
        max_lifetime=i64Timedelta.parse(timedelta(hours=hours) if hours else timedelta(milliseconds=-1))))
    _check(response.error_code)
    return CreatedToken(response.token_id, base64.b64encode(bytes(response.hmac)).decode("ascii"),
                        f"{response.principal_type}:{response.principal_name}",
                        _time_of(response.expiry_timestamp), _time_of(response.max_timestamp))


async def renew_token(clients: ConsoleClients, token_id: str, hours: float) -> str:
    hmac = await _hmac_of(clients, token_id)
    period = timedelta(hours=hours) if hours else timedelta(milliseconds=-1)
    response = await send_any(clients, RenewDelegationTokenRequest(hmac=hmac,
                                                                   renew_period=i64Timedelta.parse(period)))
    _check(response.error_code)
    return _time_of(response.expiry_timestamp)


async def expire_token(clients: ConsoleClients, token_id: str) -> None:
    hmac = await _hmac_of(clients, token_id)
    response = await send_any(clients, ExpireDelegationTokenRequest(
        hmac=hmac, expiry_time_period=i64Timedelta.parse(timedelta(milliseconds=-1))))
    _check(response.error_code)


async def _hmac_of(clients: ConsoleClients, token_id: str) -> bytes:
    rows, unavailable = await list_tokens(clients)
    if unavailable:
        raise ConsoleError(403, unavailable)
    for row in rows:
        if row.token_id == token_id:
            return row.hmac
    raise ConsoleError(404, f"no token {token_id} that you may see")


def _check(code: ErrorCode) -> None:
    if code in UNAVAILABLE:
        raise ConsoleError(403, UNAVAILABLE[code])
    check_error(code, None)


def _principal(text: str, what: str) -> KafkaPrincipal:
    try:
        principal = KafkaPrincipal.parse(text.strip())
    except ValueError:
        raise ConsoleError(400, f"the {what} is a principal like User:alice, not {text.strip()!r}") from None
    if principal.principal_type != USER_TYPE:
        raise ConsoleError(400, f"the {what} must be a User principal, not {principal}")
    return principal


def _hours(text: str, what: str) -> float:
    if not text.strip():
        return 0.0
    try:
        hours = float(text)
    except ValueError:
        raise ConsoleError(400, f"the {what} is a number of hours, not {text!r}") from None
    if not 0 < hours <= 24 * 365:
        raise ConsoleError(400, f"the {what} is between 0 and {24 * 365} hours")
    return hours


def _time(timestamp_ms: int) -> str:
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _time_of(value: datetime.datetime) -> str:
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    async def index(request: Request) -> Response:
        rows, unavailable = await list_tokens(ctx.clients_for(request))
        return ctx.render(request, "tokens/index.html", rows=rows, unavailable=unavailable,
                          notice=request.query_params.get("notice"))

    async def create(request: Request) -> Response:
        created = await create_token(ctx.clients_for(request), await form_fields(request))
        return ctx.render(request, "tokens/created.html", token=created)

    async def renew(request: Request) -> Response:
        fields = await form_fields(request)
        token_id = fields.get("token_id", "")
        expires = await renew_token(ctx.clients_for(request), token_id,
                                    _hours(fields.get("hours", ""), "renewal period"))
        notice = f"renewed {token_id}: it now expires {expires}"
        return RedirectResponse("/tokens?" + urlencode({"notice": notice}), status_code=303)

    async def expire(request: Request) -> Response:
        token_id = (await form_fields(request)).get("token_id", "")
        await expire_token(ctx.clients_for(request), token_id)
        return RedirectResponse("/tokens?" + urlencode({"notice": f"expired {token_id}"}), status_code=303)

    return [Route("/tokens", index, methods=["GET"]), Route("/tokens", create, methods=["POST"]),
            Route("/tokens/renew", renew, methods=["POST"]), Route("/tokens/expire", expire, methods=["POST"])]
