"""Routes for compatibility levels (/config), modes (/mode), contexts and the registry's own metadata."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import moldau
from moldau.registry.http.api import Api, handler, json_response

__all__ = ["routes"]

# The registry's id within its cluster, as Confluent's /v1/metadata/id names it.
REGISTRY_CLUSTER_ID = "schema-registry"


async def config(api: Api, request: Request) -> Response:
    subject = request.path_params.get("subject")
    if request.method == "GET":
        return json_response(api.core.admin.get_config(subject, api.flag(request, "defaultToGlobal")))
    if request.method == "PUT":
        body = await api.body(request)
        return await api.write(request, lambda: api.core.admin.set_config(subject, body))
    return await api.write(request, lambda: api.core.admin.delete_config(subject))


async def mode(api: Api, request: Request) -> Response:
    subject = request.path_params.get("subject")
    if request.method == "GET":
        return json_response(api.core.admin.get_mode(subject, api.flag(request, "defaultToGlobal")))
    if request.method == "PUT":
        body = await api.body(request)
        force = api.flag(request, "force")
        return await api.write(request, lambda: api.core.admin.set_mode(subject, body, force))
    if subject is None:
        return await api.write(request, lambda: api.core.admin.set_mode(None, {"mode": "READWRITE"}, True))
    return await api.write(request, lambda: api.core.admin.delete_mode(subject))


async def contexts(api: Api, request: Request) -> Response:
    return json_response(api.page(request, ["."]))  # only the default context


async def root(api: Api, request: Request) -> Response:
    return json_response({})


async def metadata_id(api: Api, request: Request) -> Response:
    return json_response({"scope": {"path": [], "clusters": {"kafka-cluster": api.core.cluster_id,
                                                             "schema-registry-cluster": REGISTRY_CLUSTER_ID}}})


async def metadata_version(api: Api, request: Request) -> Response:
    return json_response({"version": moldau.__version__, "commitId": ""})


def routes(api: Api) -> list[Route]:
    return [
        Route("/", handler(api, root), methods=["GET"]),
        Route("/config", handler(api, config), methods=["GET", "PUT", "DELETE"]),
        Route("/config/{subject:subject}", handler(api, config), methods=["GET", "PUT", "DELETE"]),
        Route("/mode", handler(api, mode), methods=["GET", "PUT", "DELETE"]),
        Route("/mode/{subject:subject}", handler(api, mode), methods=["GET", "PUT", "DELETE"]),
        Route("/contexts", handler(api, contexts), methods=["GET"]),
        Route("/v1/metadata/id", handler(api, metadata_id), methods=["GET"]),
        Route("/v1/metadata/version", handler(api, metadata_version), methods=["GET"]),
    ]
