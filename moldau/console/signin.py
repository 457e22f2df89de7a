"""Sign-in on a secured cluster, and the cross-site request check every console form passes.

When the console's client listener wants SASL (`ClientFactory.secured`), every page needs a signed-in user: a
request without a live session is sent to `/login` (a page) or answered 401 (htmx fragments, JSON), and a
request with one acts with that user's credentials (`request.state.credentials`, which
`ConsoleContext.clients_for` reads), so the cluster applies that user's ACLs and quotas.

The session is a random token in a cookie that scripts cannot read (HttpOnly), that browsers send only from the
console's own pages (SameSite=Strict) and, on https, only over TLS (Secure). State-changing requests must also
come from the console's own pages: a POST whose Origin (or, without one, Referer) names another site is refused
with 403. Browsers always send Origin on cross-site POSTs, so a request with neither header comes from a script,
which the cookie's SameSite already keeps from riding on a browser's session.

`/metrics`, the client telemetry endpoints and the static files stay open: Prometheus and clients use them
without a session.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from urllib.parse import quote, urlsplit

from kio.schema.metadata.v12.request import MetadataRequest
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp

from moldau.console.clients import ClientFactory, Credentials
from moldau.console.sessions import Session, SessionStore
from moldau.net.client import ConnectionFailed
from moldau.security.sasl.client import SaslClientError

__all__ = ["COOKIE", "SignIn", "SignInFailed", "SignInMiddleware", "local_path"]

COOKIE = "moldau_session"
OPEN_PATHS = frozenset({"/login", "/metrics", "/favicon.ico"})
OPEN_PREFIXES = ("/static/", "/v1/")
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class SignInFailed(Exception):
    """The cluster refused the credentials (status 401) or could not be asked (502)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SignIn:
    """The console's sessions and how a user signs in and out."""

    def __init__(self, clients: ClientFactory, sessions: SessionStore | None = None) -> None:
        self.clients = clients
        self.sessions = sessions if sessions is not None else SessionStore(time.monotonic)  # an empty store is falsy

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return self.clients.access.mechanisms if self.clients.access else ()

    async def check(self, credentials: Credentials) -> None:
        """A real request to the cluster as the user: Metadata after SASL. Raises SignInFailed."""
        access = self.clients.access
        if access is None or credentials.mechanism not in access.mechanisms:
            raise SignInFailed(400, f"choose one of: {', '.join(self.mechanisms)}")
        request = MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False)
        try:
            await access.request(credentials, request)
        except ConnectionFailed as exc:
            if isinstance(exc.__cause__, SaslClientError):
                # Which part was wrong (user, password, mechanism) is not the browser's business.
                raise SignInFailed(401, "sign-in failed") from None
            raise SignInFailed(502, f"cannot reach the cluster at {access.host}:{access.port}") from None
        except TimeoutError:
            raise SignInFailed(502, f"the cluster at {access.host}:{access.port} did not answer") from None

    def start(self, credentials: Credentials) -> str:
        """A new session for checked credentials; its token."""
        session, ended = self.sessions.create(credentials)
        self._forget(ended)
        return session.token

    def session(self, token: str | None) -> Session | None:
        """The live session of a request's cookie. Sessions that timed out meanwhile end here, and their users'
        pooled connections are closed, as at sign-out."""
        self._forget(self.sessions.expire())
        return self.sessions.get(token)

    def end(self, token: str | None) -> None:
        session = self.sessions.end(token)
        if session is not None:
            self._forget([session.credentials])

    def _forget(self, ended: list[Credentials]) -> None:
        for credentials in ended:
            if not self.sessions.in_use(credentials):
                self.clients.forget(credentials)


class SignInMiddleware(BaseHTTPMiddleware):
    def __init__(self, app: ASGIApp, signin: SignIn) -> None:
        super().__init__(app)
        self.signin = signin

    async def dispatch(self, request: Request,
                       call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        path = request.url.path
        if path.startswith("/v1/"):
            return await call_next(request)  # client telemetry: Kafka clients, not browsers
        if request.method in UNSAFE_METHODS and not same_origin(request):
            return PlainTextResponse("cross-site request refused", status_code=403)
        if not self.signin.clients.secured or path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            return await call_next(request)
        session = self.signin.session(request.cookies.get(COOKIE))
        if session is None:
            return _unauthenticated(request)
        request.state.credentials = session.credentials
        return await call_next(request)


def _unauthenticated(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    login = f"/login?next={quote(target, safe='')}"
    if request.headers.get("hx-request"):
        # htmx does not swap a 401; HX-Redirect makes it load the sign-in page instead.
        return PlainTextResponse("sign in first", status_code=401, headers={"HX-Redirect": login})
    if "text/html" not in request.headers.get("accept", "") or request.method != "GET":
        return JSONResponse({"error_code": 401, "message": "sign in first"}, status_code=401)
    return RedirectResponse(login, status_code=303)


def same_origin(request: Request) -> bool:
    """False when the request's Origin (or Referer) is another site than the console itself."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if source is None:
        return True
    parts = urlsplit(source)
    own_host = request.headers.get("host", "")
    return parts.scheme == request.url.scheme and parts.netloc == own_host and bool(own_host)


def local_path(target: str | None) -> str:
    """Where to go after signing in: a path on this console, never another site."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
