"""`/login` and `/logout`: signing in to the console of a secured cluster (moldau.console.signin).

The login form takes a SASL user, password and mechanism (those the console's listener enables); the console
checks them with a real request to the cluster as that user before starting a session, and tells a wrong password
only as "sign-in failed". On an unsecured cluster there is nobody to sign in as, and `/login` goes to `/`.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from moldau.console.clients import Credentials
from moldau.console.context import ConsoleContext
from moldau.console.forms import form_fields
from moldau.console.signin import COOKIE, SignInFailed, local_path

__all__ = ["routes"]


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    signin = ctx.signin

    def form(request: Request, status: int = 200, error: str | None = None, username: str = "",
             mechanism: str | None = None, target: str = "/") -> Response:
        mechanisms = signin.mechanisms
        return ctx.render(request, "auth/login.html", status_code=status, error=error, username=username,
                          mechanisms=mechanisms, mechanism=mechanism or mechanisms[0], next=target)

    async def login_page(request: Request) -> Response:
        if not ctx.clients.secured:
            return RedirectResponse("/", status_code=303)
        return form(request, target=local_path(request.query_params.get("next")))

    async def login(request: Request) -> Response:
        if not ctx.clients.secured:
            return RedirectResponse("/", status_code=303)
        fields = await form_fields(request)
        username, password = fields.get("username", "").strip(), fields.get("password", "")
        mechanism = fields.get("mechanism", "")
        target = local_path(fields.get("next"))
        if not username or not password:
            return form(request, 400, "enter a user name and a password", username, mechanism or None, target)
        credentials = Credentials(mechanism, username, password)
        try:
            await signin.check(credentials)
        except SignInFailed as exc:
            chosen = mechanism if mechanism in signin.mechanisms else None
            return form(request, exc.status, exc.message, username, chosen, target)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(COOKIE, signin.start(credentials), httponly=True, samesite="strict",
                            secure=request.url.scheme == "https", path="/")
        return response

    async def logout(request: Request) -> Response:
        signin.end(request.cookies.get(COOKIE))
        response = RedirectResponse("/login" if ctx.clients.secured else "/", status_code=303)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    return [Route("/login", login_page, methods=["GET"]), Route("/login", login, methods=["POST"]),
            Route("/logout", logout, methods=["POST"])]
