"""`/quotas`: client quotas (KIP-546) of users, client ids and their defaults, and a form that sets or removes them.

confluent-kafka has no client quota API, so DescribeClientQuotas and AlterClientQuotas go through Moldau's own
client on the console's listener (the user's pooled session, moldau.console.native), authenticated as the signed-in
user: listing needs DESCRIBE_CONFIGS on the cluster, changing ALTER_CONFIGS (else 403). The quota names are Kafka's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, OpData
from kio.schema.alter_client_quotas.v1.request import EntityData as AlterEntity
from kio.schema.alter_client_quotas.v1.request import EntryData as AlterEntry
from kio.schema.describe_client_quotas.v1.request import DescribeClientQuotasRequest
from kio.static.primitive import f64
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from moldau.console import native
from moldau.console.clients import ConsoleClients
from moldau.console.context import ConsoleContext
from moldau.console.errors import ConsoleError
from moldau.console.forms import form_fields

__all__ = ["QUOTA_KEYS", "QuotaRow", "alter_quotas", "describe_quotas", "routes"]

QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
DEFAULT = "<default>"  # how kafka-configs writes the default entity of a type
Entity = tuple[tuple[str, str | None], ...]  # (entity type: user or client-id, name or None for the default)


@dataclass(frozen=True)
class QuotaRow:
    user: str | None  # a name, DEFAULT, or None when the entity names no user
    client: str | None
    values: dict[str, float]

    def edit_query(self) -> str:
        return urlencode({"user": self.user or "", "client": self.client or ""})


def _status(code: Any) -> int:
    name = code.name.upper()
    if "AUTHORIZATION" in name:
        return 403
    return 400 if name.startswith("INVALID") or name == "UNKNOWN_TOPIC_OR_PARTITION" else 502


async def _call(clients: ConsoleClients, request: Any) -> Any:
    return await native.send_any(clients, request)


def _entity_row(entity: Any, values: dict[str, float]) -> QuotaRow:
    parts = {e.entity_type: (DEFAULT if e.entity_name is None else e.entity_name) for e in entity}
    return QuotaRow(parts.get("user"), parts.get("client-id"), values)


async def describe_quotas(clients: ConsoleClients) -> list[QuotaRow]:
    """Every entity with client quotas, users first."""
    response = await _call(clients, DescribeClientQuotasRequest(components=(), strict=False))
    if response.error_code.value != 0:
        raise ConsoleError(_status(response.error_code),
                           f"{response.error_code.name.upper()}: {response.error_message or ''}".rstrip(": "))
    # IP addresses' connection creation rates (KIP-612) are not client quotas of a user or client id: this page
    # leaves them to `moldau quotas --ip` rather than show them as rows without a user or a client.
    rows = [_entity_row(entry.entity, {v.key: v.value for v in entry.values}) for entry in response.entries or ()
            if all(e.entity_type != "ip" for e in entry.entity)]
    return sorted(rows, key=lambda r: (r.user is None, r.user or "", r.client or ""))


def entity_from_form(fields: dict[str, str]) -> Entity:
    """The entity the form names: a user, a client id or both; `<default>` is the type's default."""
    parts: list[tuple[str, str | None]] = []
    for field, entity_type in (("user", "user"), ("client", "client-id")):
        name = fields.get(field, "").strip()
        if name:
            parts.append((entity_type, None if name == DEFAULT else name))
    if not parts:
        raise ConsoleError(400, f"name a user, a client id or both ({DEFAULT} for the default)")
    return tuple(parts)


def ops_from_form(fields: dict[str, str]) -> list[tuple[str, float | None]]:
    """Each quota field: a number sets the quota, an empty field removes it."""
    ops: list[tuple[str, float | None]] = []
    for key in QUOTA_KEYS:
        text = fields.get(key, "").strip()
        if not text:
            ops.append((key, None))
            continue
        try:
            value = float(text)
        except ValueError:
            raise ConsoleError(400, f"{key} is a number, not {text!r}") from None
        if value <= 0:
            raise ConsoleError(400, f"{key} must be above 0 (leave it empty to remove the quota)")
        ops.append((key, value))
    return ops


async def alter_quotas(clients: ConsoleClients, entity: Entity,
                       ops: list[tuple[str, float | None]]) -> None:
    entry = AlterEntry(entity=tuple(AlterEntity(entity_type=t, entity_name=n) for t, n in entity),
                       ops=tuple(OpData(key=k, value=f64(0.0 if v is None else v), remove=v is None)
                                 for k, v in ops))
    response = await _call(clients, AlterClientQuotasRequest(entries=(entry,), validate_only=False))
    for result in response.entries:
        if result.error_code.value != 0:
            raise ConsoleError(_status(result.error_code),
                               f"{result.error_code.name.upper()}: {result.error_message or ''}".rstrip(": "))


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    async def index(request: Request) -> Response:
        clients = ctx.clients_for(request)
        rows = await describe_quotas(clients)
        edit = {"user": request.query_params.get("user", ""), "client": request.query_params.get("client", "")}
        current = next((r.values for r in rows if (r.user or "") == edit["user"] and (r.client or "") ==
                        edit["client"]), {})
        return ctx.render(request, "quotas/index.html", rows=rows, keys=QUOTA_KEYS, edit=edit,
                          current={k: _number(v) for k, v in current.items()}, number=_number,
                          notice=request.query_params.get("notice"))

    async def save(request: Request) -> Response:
        fields = await form_fields(request)
        entity = entity_from_form(fields)
        await alter_quotas(ctx.clients_for(request), entity, ops_from_form(fields))
        shown = ", ".join(f"{'user' if t == 'user' else 'client'}={DEFAULT if n is None else n}" for t, n in entity)
        return RedirectResponse("/quotas?" + urlencode({"notice": f"saved the quotas of {shown}"}), status_code=303)

    return [Route("/quotas", index, methods=["GET"]), Route("/quotas", save, methods=["POST"])]
