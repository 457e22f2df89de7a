"""`/schemas`, `/schemas/<subject>` and `/schemas/ids/<id>`: the node's schema registry, read through its REST API
(moldau.console.registry_view, in a worker thread). When the node runs no registry, or it cannot be reached, the
page says so."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from moldau.console.context import ConsoleContext
from moldau.console.errors import ConsoleError
from moldau.console.registry_view import RegistryError, id_holders, subject_detail, subjects_overview

__all__ = ["routes"]

_NOT_FOUND_CODES = {40401, 40402, 40403}
P = ParamSpec("P")
T = TypeVar("T")


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    def registry_url() -> str:
        if ctx.registry_url is None:
            raise ConsoleError(404, "this node runs no schema registry (schema.registry.listeners is empty)")
        return ctx.registry_url

    async def subjects(request: Request) -> Response:
        if ctx.registry_url is None:
            return ctx.render(request, "schemas/subjects.html", rows=None, global_level="", registry_url=None)
        rows, global_level = await _ask(subjects_overview, ctx.registry_url)
        return ctx.render(request, "schemas/subjects.html", rows=rows, global_level=global_level,
                          registry_url=ctx.registry_url)

    async def subject(request: Request) -> Response:
        detail = await _ask(subject_detail, registry_url(), request.path_params["subject"])
        return ctx.render(request, "schemas/subject.html", detail=detail)

    async def schema_id(request: Request) -> Response:
        wanted = request.path_params["id"]
        holders = await _ask(id_holders, registry_url(), wanted)
        if not holders:
            raise ConsoleError(404, f"no subject holds schema {wanted}")
        name, version = holders[0]
        return RedirectResponse(f"/schemas/{quote(name, safe='')}#v{version}", status_code=302)

    return [Route("/schemas", subjects, methods=["GET"]),
            Route("/schemas/ids/{id:int}", schema_id, methods=["GET"]),
            Route("/schemas/{subject:path}", subject, methods=["GET"])]


async def _ask(read: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """A read of the registry's REST API in a worker thread (its client blocks); its failure as a console error."""
    try:
        return await asyncio.to_thread(read, *args, **kwargs)
    except RegistryError as exc:
        raise _console_error(exc) from None


def _console_error(exc: RegistryError) -> ConsoleError:
    if exc.status == 0:
        return ConsoleError(502, f"the schema registry is not answering: {exc.message}")
    if exc.error_code in _NOT_FOUND_CODES or exc.status == 404:
        return ConsoleError(404, exc.message)
    return ConsoleError(502, f"the schema registry answered: {exc}")
