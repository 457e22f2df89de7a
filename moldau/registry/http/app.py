"""The registry's Starlette app: every route group, Confluent-shaped answers for unknown paths and methods, and
HTTP Basic authentication in front of all of them when it is on."""

from __future__ import annotations

import logging
import ssl

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from moldau.registry.core import RegistryCore, Store
from moldau.registry.http import schemas, settings, subjects
from moldau.registry.http.api import Api, json_response
from moldau.registry.http.basic_auth import BasicAuth
from moldau.registry.http.slashes import EncodedSlashes
from moldau.security.passwords import PasswordCheck

__all__ = ["build_app"]

log = logging.getLogger(__name__)


def build_app(core: RegistryCore, store: Store, passwords: PasswordCheck | None = None, realm: str = "",
              relay_tls: ssl.SSLContext | None = None) -> Starlette:
    api = Api(core, store, relay_tls)

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        return json_response({"error_code": status, "message": detail}, status)

    async def internal_error(request: Request, exc: Exception) -> Response:
        log.exception("schema registry: %s %s failed", request.method, request.url.path, exc_info=exc)
        return json_response({"error_code": 50001, "message": f"internal error: {exc}"}, 500)

    return Starlette(routes=[*settings.routes(api), *subjects.routes(api), *schemas.routes(api)],
                     exception_handlers={HTTPException: http_error, Exception: internal_error},
                     middleware=[*_authentication(passwords, realm), Middleware(EncodedSlashes)])


def _authentication(passwords: PasswordCheck | None, realm: str) -> list[Middleware]:
    return [] if passwords is None else [Middleware(BasicAuth, check=passwords, realm=realm)]
