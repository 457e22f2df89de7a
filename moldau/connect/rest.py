"""Kafka Connect's REST API over a herder: paths, status codes and JSON shapes as Kafka Connect answers them,
errors as `{"error_code": <HTTP status>, "message": ...}`. The herder blocks, so every call runs in a thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from moldau import __version__
from moldau.connect.config import config_infos
from moldau.connect.errors import NotFoundError
from moldau.connect.loggers import LoggerLevels, UnknownLevel, UnknownLogger
from moldau.connect.worker.herder import REBALANCE_MESSAGE, Herder, HerderError, RequestTargetError
from moldau.connect.worker.worker_config import CONNECTOR_CLASS, NAME
from moldau.net.http_body import BodyIncomplete, BodyTooLarge, json_document, read_bounded

__all__ = ["build_app"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Endpoint = Callable[[Request], Awaitable[Response]]
Forward = Callable[[str, str, bytes | None], tuple[int, bytes]]
MAX_BODY_BYTES = 16 * 1024 * 1024  # connector configs are small; a larger body is refused with 413


def json_response(content: Any, status: int = 200) -> Response:
    return Response(json.dumps(content, separators=(",", ":")), status, media_type="application/json")


def error(status: int, message: str) -> Response:
    return json_response({"error_code": status, "message": message}, status)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").strip().lower() == "true"


async def _body(request: Request) -> Any:
    try:
        raw = await read_bounded(request, MAX_BODY_BYTES)
    except BodyTooLarge as exc:
        raise HerderError(413, str(exc)) from None
    except BodyIncomplete as exc:
        raise HerderError(400, str(exc)) from None
    request.state.raw_body = raw  # kept in case the request is forwarded to another worker
    if not raw.strip():
        raise HerderError(400, "Request body is empty")
    try:
        return json_document(raw)
    except ValueError as exc:  # UnicodeDecodeError is one
        raise HerderError(400, f"Cannot deserialize the request body: {exc}") from None


read_json = _body


def _string_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise HerderError(400, f"{what} must be a JSON object")
    return {str(k): v if isinstance(v, str) else json.dumps(v) if isinstance(v, (dict, list))
            else str(v).lower() if isinstance(v, bool) else "" if v is None else str(v) for k, v in value.items()}


class ConnectApi:
    def __init__(self, herder: Herder, cluster_id: Callable[[], str | None]) -> None:
        self.herder = herder
        self.cluster_id = cluster_id
        self.loggers = LoggerLevels(lambda: int(time.time() * 1000))

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(function, *args)

    async def root(self, request: Request) -> Response:
        cluster_id = await self.call(self.cluster_id)
        return json_response({"version": __version__, "commit": "", "kafka_cluster_id": cluster_id})

    async def list_connectors(self, request: Request) -> Response:
        names = self.herder.connectors()
        expand = request.query_params.getlist("expand")
        if not expand:
            return json_response(names)
        answer: dict[str, dict[str, Any]] = {}
        for name in names:
            entry: dict[str, Any] = {}
            try:
                if "status" in expand:
                    entry["status"] = self.herder.status(name)
                if "info" in expand:
                    entry["info"] = self.herder.info(name)
            except HerderError:
                continue  # deleted meanwhile
            answer[name] = entry
        return json_response(answer)

    async def create(self, request: Request) -> Response:
        body = await _body(request)
        if not isinstance(body, dict):
            raise HerderError(400, "The request body must be a JSON object with name and config")
        config = _string_map(body.get("config", {}), "config")
        name = body.get("name") or config.get(NAME)
        if not isinstance(name, str) or not name.strip():
            raise HerderError(400, "Connector name must be specified: the name field or the config's name")
        if config.get(NAME, name) != name:
            raise HerderError(400, "Connector name configuration (" + config[NAME] + ") doesn't match connector "
                                   "name in the URL (" + name + ")")
        await self.call(self.herder.put_connector, name.strip(), config, False)
        return json_response(self.herder.info(name.strip()), 201)

    async def get(self, request: Request) -> Response:
        return json_response(self.herder.info(request.path_params["name"]))

    async def get_config(self, request: Request) -> Response:
        return json_response(self.herder.config(request.path_params["name"]))

    async def put_config(self, request: Request) -> Response:
        name = request.path_params["name"]
        config = _string_map(await _body(request), "The connector config")
        if config.get(NAME, name) != name:
            raise HerderError(400, f"Connector name configuration ({config[NAME]}) doesn't match connector name "
                                   f"in the URL ({name})")
        created = await self.call(self.herder.put_connector, name, config, True)
        return json_response(self.herder.info(name), 201 if created else 200)

    async def patch_config(self, request: Request) -> Response:
        name = request.path_params["name"]
        patch = await _body(request)
        if not isinstance(patch, dict):
            raise HerderError(400, "The patch must be a JSON object")
        config = self.herder.config(name)
        for key, value in patch.items():
            if value is None:
                config.pop(str(key), None)  # a null removes the key, as Kafka's PATCH does
            else:
                config.update(_string_map({key: value}, "The patch"))
        await self.call(self.herder.put_connector, name, config, True)
        return json_response(self.herder.info(name))

    async def status(self, request: Request) -> Response:
        return json_response(self.herder.status(request.path_params["name"]))

    async def tasks(self, request: Request) -> Response:
        return json_response(self.herder.task_configs(request.path_params["name"]))

    async def task_status(self, request: Request) -> Response:
        return json_response(self.herder.task_status(request.path_params["name"], _task_id(request)))

    async def restart(self, request: Request) -> Response:
        answer = await self.call(self.herder.restart, request.path_params["name"], _flag(request, "includeTasks"),
                                 _flag(request, "onlyFailed"))
        return Response(status_code=204) if answer is None else json_response(answer, 202)

    async def restart_task(self, request: Request) -> Response:
        await self.call(self.herder.restart_task, request.path_params["name"], _task_id(request))
        return Response(status_code=204)

    async def pause(self, request: Request) -> Response:
        await self.call(self.herder.pause, request.path_params["name"])
        return Response(status_code=202)

    async def resume(self, request: Request) -> Response:
        await self.call(self.herder.resume, request.path_params["name"])
        return Response(status_code=202)

    async def stop(self, request: Request) -> Response:
        await self.call(self.herder.stop, request.path_params["name"])
        return Response(status_code=204)

    async def delete(self, request: Request) -> Response:
        await self.call(self.herder.delete, request.path_params["name"])
        return Response(status_code=204)

    async def topics(self, request: Request) -> Response:
        name = request.path_params["name"]
        return json_response({name: {"topics": self.herder.topics(name)}})

    async def reset_topics(self, request: Request) -> Response:
        # In a thread: the reset waits for its tombstones to reach the status topic.
        await self.call(self.herder.reset_topics, request.path_params["name"])
        return Response(status_code=202)

    async def offsets(self, request: Request) -> Response:
        from moldau.connect.worker.offsets_admin import sink_offsets
        name = request.path_params["name"]
        if self.herder.connector_type(name) == "sink":
            found = await self.call(sink_offsets, self.herder.worker, name)
            return json_response({"offsets": found})
        return json_response({"offsets": self.herder.source_offsets(name)})

    async def alter_offsets(self, request: Request) -> Response:
        body = await _body(request)
        if not isinstance(body, dict) or not isinstance(body.get("offsets"), list):
            raise HerderError(400, "The request body must be an object with an offsets list")
        await self.call(self.herder.alter_offsets, request.path_params["name"], body["offsets"])
        return json_response({"message": "The offsets for this connector have been altered successfully"})

    async def reset_offsets(self, request: Request) -> Response:
        await self.call(self.herder.reset_offsets, request.path_params["name"])
        return json_response({"message": "The offsets for this connector have been reset successfully"})

    async def plugins(self, request: Request) -> Response:
        connectors_only = request.query_params.get("connectorsOnly", "true").strip().lower() != "false"
        return json_response([info.json() for info in self.herder.registry.plugins(connectors_only)])

    async def validate(self, request: Request) -> Response:
        plugin = request.path_params["plugin"]
        config = _string_map(await _body(request), "The connector config")
        try:
            info = self.herder.registry.connector(plugin)
        except NotFoundError as exc:
            raise HerderError(404, str(exc)) from None
        given = config.get(CONNECTOR_CLASS)
        if given and self.herder.registry.find(given) != info:
            raise HerderError(400, f"Included connector type {given} does not match request type {plugin}")
        config.setdefault(CONNECTOR_CLASS, plugin)
        return json_response(await self.call(self.herder.validate, config))

    async def plugin_config(self, request: Request) -> Response:
        """KIP-769: the definitions of the plugin's own configs."""
        try:
            info = self.herder.registry.get(request.path_params["plugin"])
        except NotFoundError as exc:
            raise HerderError(404, str(exc)) from None
        definition = info.cls().config_def()
        infos = config_infos(info.class_name, definition, [])
        return json_response([c["definition"] for c in infos["configs"]])


    async def list_loggers(self, request: Request) -> Response:
        return json_response(self.loggers.all())

    async def get_logger(self, request: Request) -> Response:
        try:
            return json_response(self.loggers.level(request.path_params["logger"]))
        except UnknownLogger as exc:
            raise HerderError(404, str(exc)) from None

    async def set_logger(self, request: Request) -> Response:
        """KIP-495 / KIP-976: `scope=worker` (the default) answers the loggers changed; `scope=cluster` means
        every worker, which in standalone mode is this one, and answers 204 as Kafka does."""
        body = await _body(request)
        level = body.get("level") if isinstance(body, dict) else None
        if not isinstance(level, str):
            raise HerderError(400, "Desired 'level' parameter was not specified in request.")
        scope = request.query_params.get("scope", "worker").strip().lower()
        try:
            affected = self.loggers.set_level(request.path_params["logger"], level)
        except UnknownLevel as exc:
            raise HerderError(400, str(exc)) from None
        return Response(status_code=204) if scope == "cluster" else json_response(affected)


def _task_id(request: Request) -> int:
    raw = request.path_params["task"]
    try:
        return int(raw)
    except ValueError:
        raise HerderError(404, f"Task {request.path_params['name']}-{raw} not found") from None


def _endpoint(method: Callable[[Request], Awaitable[Response]], forward: Forward | None) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        try:
            return await method(request)
        except RequestTargetError as exc:
            return await _forward(request, exc.url, forward)
        except HerderError as exc:
            return error(exc.status, exc.message)
    return endpoint


async def _forward(request: Request, url: str, forward: Forward | None) -> Response:
    """Send the request on to the worker that must handle it (distributed mode), once: a request that was
    already forwarded (`forward=false`) gets Kafka's 409 instead."""
    from moldau.connect.distributed.forwarding import forward_url
    if forward is None or request.query_params.get("forward", "true").strip().lower() == "false":
        return error(409, REBALANCE_MESSAGE)
    query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "forward"])
    body: bytes | None = getattr(request.state, "raw_body", None)
    status, answer = await asyncio.to_thread(forward, forward_url(url, request.url.path, query), request.method,
                                             body)
    return Response(answer, status, media_type="application/json" if answer else None)


def build_app(herder: Herder, cluster_id: Callable[[], str | None],
              extra: Sequence[tuple[str, Endpoint, list[str]]] = (), forward: Forward | None = None,
              admin: bool = True) -> Starlette:
    """The API over `herder`; `extra` adds routes (distributed mode's internal endpoint), `forward` sends a
    request another worker must handle there (distributed mode: (url, method, body) -> (status, body)); `admin`
    False leaves the `/admin` endpoints out (served on `admin.listeners`, or nowhere)."""
    api = ConnectApi(herder, cluster_id)
    c = "/connectors/{name}"
    table: list[tuple[str, Endpoint, list[str]]] = [
        ("/", api.root, ["GET"]),
        ("/connectors", api.list_connectors, ["GET"]),
        ("/connectors", api.create, ["POST"]),
        (c, api.get, ["GET"]),
        (c, api.delete, ["DELETE"]),
        (c + "/config", api.get_config, ["GET"]),
        (c + "/config", api.put_config, ["PUT"]),
        (c + "/config", api.patch_config, ["PATCH"]),
        (c + "/status", api.status, ["GET"]),
        (c + "/tasks", api.tasks, ["GET"]),
        (c + "/tasks/{task}/status", api.task_status, ["GET"]),
        (c + "/tasks/{task}/restart", api.restart_task, ["POST"]),
        (c + "/restart", api.restart, ["POST"]),
        (c + "/pause", api.pause, ["PUT"]),
        (c + "/resume", api.resume, ["PUT"]),
        (c + "/stop", api.stop, ["PUT"]),
        (c + "/topics", api.topics, ["GET"]),
        (c + "/topics/reset", api.reset_topics, ["PUT"]),
        (c + "/offsets", api.offsets, ["GET"]),
        (c + "/offsets", api.alter_offsets, ["PATCH"]),
        (c + "/offsets", api.reset_offsets, ["DELETE"]),
        ("/connector-plugins", api.plugins, ["GET"]),
        ("/connector-plugins/{plugin}/config", api.plugin_config, ["GET"]),
        ("/connector-plugins/{plugin}/config/validate", api.validate, ["PUT"]),
        *(_admin_table(api) if admin else ()),
        *extra,
    ]
    return _app(table, forward)


def build_admin_app(herder: Herder, cluster_id: Callable[[], str | None]) -> Starlette:
    """The `/admin` endpoints alone, for the listeners of `admin.listeners`."""
    return _app(_admin_table(ConnectApi(herder, cluster_id)), None)


def _admin_table(api: ConnectApi) -> list[tuple[str, Endpoint, list[str]]]:
    return [
        ("/admin/loggers", api.list_loggers, ["GET"]),
        ("/admin/loggers/{logger}", api.get_logger, ["GET"]),
        ("/admin/loggers/{logger}", api.set_logger, ["PUT"]),
    ]


def _app(table: Sequence[tuple[str, Endpoint, list[str]]], forward: Forward | None) -> Starlette:
    routes = [Route(path, _endpoint(endpoint, forward), methods=methods) for path, endpoint, methods in table]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        return error(status, str(detail))

    async def internal_error(request: Request, exc: Exception) -> Response:
        log.exception("connect REST: %s %s failed", request.method, request.url.path, exc_info=exc)
        return error(500, f"{type(exc).__name__}: {exc}")

    return Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: internal_error})
