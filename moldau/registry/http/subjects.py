"""Routes under /subjects: list subjects, register and look up schemas, read and delete versions."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from moldau.registry.http.api import CONTENT_TYPE, Api, handler, json_response
from moldau.registry.operations import schema_answer
from moldau.registry.requests import parse_schema_request, parse_version

__all__ = ["routes"]


async def list_subjects(api: Api, request: Request) -> Response:
    prefix = request.query_params.get("subjectPrefix", "")
    if prefix.startswith(":.:"):  # the default context, named explicitly
        prefix = prefix[3:]
    state = api.core.state
    if api.flag(request, "deletedOnly") or api.flag(request, "deleted_only"):
        found = [s for s in state.subjects(deleted=True, prefix=prefix) if not state.has_subject(s)]
    else:
        found = state.subjects(api.flag(request, "deleted"), prefix)
    return json_response(api.page(request, found))


async def lookup_or_delete(api: Api, request: Request) -> Response:
    subject = request.path_params["subject"]
    if request.method == "DELETE":
        permanent = api.flag(request, "permanent")
        return await api.write(request, lambda: api.core.admin.delete_subject(subject, permanent))
    schema = parse_schema_request(await api.body(request))
    normalize, deleted = api.flag(request, "normalize"), api.flag(request, "deleted")
    return json_response(await api.read(lambda: api.core.ops.lookup(subject, schema, normalize, deleted)))


async def versions(api: Api, request: Request) -> Response:
    subject = request.path_params["subject"]
    if request.method == "POST":
        schema = parse_schema_request(await api.body(request))
        normalize = api.flag(request, "normalize")
        return await api.write(request, lambda: api.core.ops.register(subject, schema, normalize))
    deleted = api.flag(request, "deleted")
    return json_response(await api.read(lambda: api.core.ops.versions(subject, deleted)))


async def version(api: Api, request: Request) -> Response:
    subject = request.path_params["subject"]
    number = parse_version(request.path_params["version"])
    if request.method == "DELETE":
        permanent = api.flag(request, "permanent")
        return await api.write(request, lambda: api.core.admin.delete_version(subject, number, permanent))
    deleted = api.flag(request, "deleted")
    held = await api.read(lambda: api.core.ops.get_version(subject, number, deleted))
    answer = schema_answer(held)
    answer["schema"] = api.schema_text(request, held.id, held.schema_type, held.schema)
    return json_response(answer)


async def version_schema(api: Api, request: Request) -> Response:
    """The schema's text itself, unquoted, as Confluent answers it."""
    subject = request.path_params["subject"]
    number = parse_version(request.path_params["version"])
    deleted = api.flag(request, "deleted")
    held = await api.read(lambda: api.core.ops.get_version(subject, number, deleted))
    return Response(held.schema, 200, media_type=CONTENT_TYPE)


async def referenced_by(api: Api, request: Request) -> Response:
    subject = request.path_params["subject"]
    number = parse_version(request.path_params["version"])
    held = await api.read(lambda: api.core.ops.get_version(subject, number, deleted=True))
    return json_response(api.core.state.referenced_by(subject, held.version))


def routes(api: Api) -> list[Route]:
    return [
        Route("/subjects", handler(api, list_subjects), methods=["GET"]),
        Route("/subjects/{subject:subject}/versions/{version}/schema", handler(api, version_schema), methods=["GET"]),
        Route("/subjects/{subject:subject}/versions/{version}/referencedby", handler(api, referenced_by),
              methods=["GET"]),
        Route("/subjects/{subject:subject}/versions/{version}", handler(api, version), methods=["GET", "DELETE"]),
        Route("/subjects/{subject:subject}/versions", handler(api, versions), methods=["GET", "POST"]),
        Route("/subjects/{subject:subject}", handler(api, lookup_or_delete), methods=["POST", "DELETE"]),
    ]
