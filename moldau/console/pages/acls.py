"""`/acls`: the cluster's ACL bindings (principal, host, operation, permission, resource pattern) with filters, and
creating and deleting them through confluent-kafka's AdminClient (CreateAcls / DeleteAcls / DescribeAcls).

The console acts as the signed-in user: listing needs DESCRIBE on the cluster, creating and deleting ALTER on it;
a user without them gets the 403 page naming CLUSTER_AUTHORIZATION_FAILED. Deleting asks to type the principal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from moldau.console.clients import ConsoleClients
from moldau.console.context import ConsoleContext
from moldau.console.errors import ConsoleError
from moldau.console.forms import form_fields

__all__ = ["AclRow", "create_acl", "delete_acl", "list_acls", "routes"]

# Kafka's resource type names; librdkafka calls the cluster resource BROKER (type code 4 in both).
RESOURCE_TYPES = {"TOPIC": ResourceType.TOPIC, "GROUP": ResourceType.GROUP, "CLUSTER": ResourceType.BROKER,
                  "TRANSACTIONAL_ID": ResourceType.TRANSACTIONAL_ID}
_TYPE_NAMES = {v: k for k, v in RESOURCE_TYPES.items()}
PATTERN_TYPES = {"LITERAL": ResourcePatternType.LITERAL, "PREFIXED": ResourcePatternType.PREFIXED}
OPERATIONS = {op.name: op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)}
PERMISSIONS = {"ALLOW": AclPermissionType.ALLOW, "DENY": AclPermissionType.DENY}
CLUSTER_NAME = "kafka-cluster"
# None matches any name, principal and host (the stubs type them str only).
_ANY = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                        AclOperation.ANY, AclPermissionType.ANY)


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


def _row(binding: Any) -> AclRow:  # AclBinding, whose enums the stubs type loosely
    return AclRow(binding.principal, binding.host, binding.operation.name, binding.permission_type.name,
                  _TYPE_NAMES.get(binding.restype, binding.restype.name), binding.name,
                  binding.resource_pattern_type.name)


async def list_acls(clients: ConsoleClients, principal: str = "", resource_type: str = "",
                    name: str = "") -> list[AclRow]:
    """Every ACL the user may see, narrowed to a principal, a resource type and names containing `name`."""
    bindings = await clients.call(clients.admin.describe_acls(_ANY))
    rows = [_row(b) for b in bindings]
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
    futures: dict[Any, Any] = clients.admin.create_acls([row.binding()])
    for future in futures.values():
        await clients.call(future)


async def delete_acl(clients: ConsoleClients, row: AclRow) -> int:
    """Deletes exactly this ACL; how many bindings went (0 when it was already gone)."""
    binding = row.binding()
    exact = AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                             binding.host, binding.operation, binding.permission_type)
    futures: dict[Any, Any] = clients.admin.delete_acls([exact])
    deleted = 0
    for future in futures.values():
        deleted += len(await clients.call(future))
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
