"""`/acls`: the cluster's ACL bindings (principal, host, operation, permission, resource pattern) with filters, and
creating and deleting them (CreateAcls / DeleteAcls / DescribeAcls, sent with Moldau's own client as the user:
confluent-kafka's admin API knows no User or DelegationToken resources, nor the token operations).

The console acts as the signed-in user: listing needs DESCRIBE on the cluster, creating and deleting ALTER on it;
a user without them gets the 403 page naming CLUSTER_AUTHORIZATION_FAILED. Deleting asks to type the principal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from moldau.console.clients import ConsoleClients
from moldau.console.context import ConsoleContext
from moldau.console.errors import ConsoleError
from moldau.console.forms import form_fields
from moldau.console.native import check_error, send_any
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

__all__ = ["AclRow", "create_acl", "delete_acl", "list_acls", "routes"]

# Kafka's resource type names (a User is the resource of CREATE_TOKENS and DESCRIBE_TOKENS, KIP-373).
RESOURCE_TYPES = {t.name: t for t in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                      ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN, ResourceType.USER)}
PATTERN_TYPES = {"LITERAL": PatternType.LITERAL, "PREFIXED": PatternType.PREFIXED}
OPERATIONS = {op.name: op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)}
PERMISSIONS = {"ALLOW": AclPermissionType.ALLOW, "DENY": AclPermissionType.DENY}
_ANY = AclBindingFilter()  # every ACL


@dataclass(frozen=True)
class AclRow:
    principal: str
    host: str
    operation: str
    permission: str
    resource_type: str
    resource_name: str
    pattern_type: str

    def query(self) -> str:
        """The row as query parameters (the delete confirmation page's address)."""
        return urlencode(self.__dict__)

    def binding(self) -> AclBinding:
        return AclBinding(RESOURCE_TYPES[self.resource_type], self.resource_name, PATTERN_TYPES[self.pattern_type],
                          self.principal, self.host, OPERATIONS[self.operation], PERMISSIONS[self.permission])


def _row(binding: AclBinding) -> AclRow:
    return AclRow(binding.principal, binding.host, binding.operation.name, binding.permission.name,
                  binding.resource_type.name, binding.resource_name, binding.pattern_type.name)


async def list_acls(clients: ConsoleClients, principal: str = "", resource_type: str = "",
                    name: str = "") -> list[AclRow]:
    """Every ACL the user may see, narrowed to a principal, a resource type and names containing `name`."""
    response = await send_any(clients, wire.describe_request(_ANY))
    check_error(response.error_code, response.error_message)
    rows = [_row(b) for b in wire.described(response)]
    rows = [r for r in rows if (not principal or r.principal == principal)
            and (not resource_type or r.resource_type == resource_type) and name.lower() in r.resource_name.lower()]
    return sorted(rows, key=lambda r: (r.resource_type, r.resource_name, r.principal, r.operation))


def row_from_form(fields: dict[str, str]) -> AclRow:
    """An ACL from the create (or delete) form. Raises ConsoleError(400) naming what is wrong."""
    principal = fields.get("principal", "").strip()
    if ":" not in principal or not principal.split(":", 1)[1]:
        raise ConsoleError(400, "the principal is a type and a name, like User:alice (User:* for everyone)")
    resource_type = fields.get("resource_type", "")
    if resource_type not in RESOURCE_TYPES:
        raise ConsoleError(400, f"the resource type is one of {', '.join(RESOURCE_TYPES)}")
    name = fields.get("resource_name", "").strip() or (CLUSTER_NAME if resource_type == "CLUSTER" else "")
    if not name:
        raise ConsoleError(400, "name the resource (* for every resource of the type)")
    checks = (("pattern_type", PATTERN_TYPES), ("operation", OPERATIONS), ("permission", PERMISSIONS))
    for field, allowed in checks:
        if fields.get(field) not in allowed:
            raise ConsoleError(400, f"{field.replace('_', ' ')} is one of {', '.join(allowed)}")
    return AclRow(principal, fields.get("host", "").strip() or "*", fields["operation"], fields["permission"],
                  resource_type, name, fields["pattern_type"])


async def create_acl(clients: ConsoleClients, row: AclRow) -> None:
    response = await send_any(clients, wire.create_request([row.binding()]))
    for result in response.results:
        check_error(result.error_code, result.error_message)


async def delete_acl(clients: ConsoleClients, row: AclRow) -> int:
    """Deletes exactly this ACL; how many bindings went (0 when it was already gone)."""
    b = row.binding()
    exact = AclBindingFilter(b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation,
                             b.permission)
    response = await send_any(clients, wire.delete_request([exact]))
    deleted = 0
    for result in response.filter_results:
        check_error(result.error_code, result.error_message)
        deleted += len(result.matching_acls)
    return deleted


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    def page(request: Request, **values: Any) -> Response:
        return ctx.render(request, "acls/index.html", resource_types=list(RESOURCE_TYPES),
                          pattern_types=list(PATTERN_TYPES), operations=list(OPERATIONS),
                          permissions=list(PERMISSIONS), **values)

    async def index(request: Request) -> Response:
        query = request.query_params
        filters = {"principal": query.get("principal", "").strip(), "resource_type": query.get("resource_type", ""),
                   "name": query.get("name", "").strip()}
        rows = await list_acls(ctx.clients_for(request), **filters)
        return page(request, rows=rows, filters=filters, notice=query.get("notice"))

    async def create(request: Request) -> Response:
        row = row_from_form(await form_fields(request))
        await create_acl(ctx.clients_for(request), row)
        notice = f"created: {row.permission} {row.principal} {row.operation} on {row.resource_type} {row.resource_name}"
        return RedirectResponse("/acls?" + urlencode({"notice": notice}), status_code=303)

    async def confirm_delete(request: Request) -> Response:
        row = row_from_form(dict(request.query_params))
        return ctx.render(request, "acls/delete.html", row=row)

    async def delete(request: Request) -> Response:
        fields = await form_fields(request)
        row = row_from_form(fields)
        if fields.get("confirm", "").strip() != row.principal:
            raise ConsoleError(400, f"type the principal ({row.principal}) to delete its ACL")
        deleted = await delete_acl(ctx.clients_for(request), row)
        notice = f"deleted {deleted} ACL{'s' if deleted != 1 else ''} of {row.principal}"
        return RedirectResponse("/acls?" + urlencode({"notice": notice}), status_code=303)

    return [Route("/acls", index, methods=["GET"]), Route("/acls", create, methods=["POST"]),
            Route("/acls/delete", confirm_delete, methods=["GET"]), Route("/acls/delete", delete, methods=["POST"])]
