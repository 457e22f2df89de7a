"""Routes under /schemas (schemas by id, the list of schemas, the types) and /compatibility."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from moldau.registry.errors import RegistryError
from moldau.registry.http.api import CONTENT_TYPE, Api, handler, json_response
from moldau.registry.operations import schema_answer
from moldau.registry.requests import parse_schema_request, parse_version
from moldau.registry.state import SchemaContent

__all__ = ["routes"]


def _schema_id(request: Request) -> int:
    try:
        return int(request.path_params["id"])
    except ValueError:
        raise RegistryError.schema_not_found() from None


def _content(api: Api, schema_id: int, subject: str | None) -> SchemaContent:
    """What the id names; with `subject`, only when that subject holds it (Confluent answers 40403 otherwise)."""
    content = api.core.state.content(schema_id)
    holders = api.core.state.holders(schema_id, deleted=True)
    if content is None or (subject and all(s != subject for s, _ in holders)):
        raise RegistryError.schema_not_found(schema_id)
    return content


async def by_id(api: Api, request: Request) -> Response:
    schema_id = _schema_id(request)
    subject = request.query_params.get("subject")
    content = await api.read(lambda: _content(api, schema_id, subject))
    answer: dict[str, Any] = {}
    if content.schema_type != "AVRO":
        answer["schemaType"] = content.schema_type
    if content.references:
        answer["references"] = [r.to_json() for r in content.references]
    answer["schema"] = api.schema_text(request, schema_id, content.schema_type, content.schema)
    if api.flag(request, "fetchMaxId"):
        answer["maxId"] = api.core.state.max_id
    return json_response(answer)


async def by_id_schema(api: Api, request: Request) -> Response:
    schema_id = _schema_id(request)
    content = await api.read(lambda: _content(api, schema_id, request.query_params.get("subject")))
    return Response(content.schema, 200, media_type=CONTENT_TYPE)


async def by_id_subjects(api: Api, request: Request) -> Response:
    schema_id = _schema_id(request)
    deleted = api.flag(request, "deleted")
    await api.read(lambda: _content(api, schema_id, None))
    return json_response(sorted({s for s, _ in api.core.state.holders(schema_id, deleted)}))


async def by_id_versions(api: Api, request: Request) -> Response:
    schema_id = _schema_id(request)
    deleted = api.flag(request, "deleted")
    await api.read(lambda: _content(api, schema_id, None))
    return json_response([{"subject": s, "version": v} for s, v in api.core.state.holders(schema_id, deleted)])


async def list_schemas(api: Api, request: Request) -> Response:
    prefix = request.query_params.get("subjectPrefix", "")
    deleted, latest_only = api.flag(request, "deleted"), api.flag(request, "latestOnly")
    found = []
    for subject in api.core.state.subjects(deleted, prefix):
        held = api.core.state.versions(subject, deleted)
        found += [schema_answer(v) for v in (held[-1:] if latest_only else held)]
    return json_response(api.page(request, found))


async def types(api: Api, request: Request) -> Response:
    return json_response(api.core.parsed.tools.types())


async def compatibility(api: Api, request: Request) -> Response:
    subject = request.path_params["subject"]
    raw_version = request.path_params.get("version")
    number = None if raw_version is None else parse_version(raw_version)
    schema = parse_schema_request(await api.body(request))
    normalize, verbose = api.flag(request, "normalize"), api.flag(request, "verbose")
    return json_response(await api.read(
        lambda: api.core.ops.check_compatibility(subject, number, schema, normalize, verbose)))


def routes(api: Api) -> list[Route]:
    return [
        Route("/schemas", handler(api, list_schemas), methods=["GET"]),
        Route("/schemas/types", handler(api, types), methods=["GET"]),
        Route("/schemas/ids/{id}", handler(api, by_id), methods=["GET"]),
        Route("/schemas/ids/{id}/schema", handler(api, by_id_schema), methods=["GET"]),
        Route("/schemas/ids/{id}/subjects", handler(api, by_id_subjects), methods=["GET"]),
        Route("/schemas/ids/{id}/versions", handler(api, by_id_versions), methods=["GET"]),
        Route("/compatibility/subjects/{subject:subject}/versions/{version}", handler(api, compatibility),
              methods=["POST"]),
        Route("/compatibility/subjects/{subject:subject}/versions", handler(api, compatibility), methods=["POST"]),
    ]
