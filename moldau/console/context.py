"""What every console page needs: the Kafka clients of the user making the request, the templates, and where the
node's schema registry is (for decoding messages), built once per console listener."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from moldau.console.clients import ClientFactory, ConsoleClients, Credentials
from moldau.console.signin import SignIn
from moldau.console.throughput import Samplers
from moldau.metrics.counters import BrokerCounters

__all__ = ["STATIC_DIR", "TEMPLATES_DIR", "ConsoleContext"]

TEMPLATES_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"


@dataclass
class ConsoleContext:
    clients: ClientFactory
    templates: Jinja2Templates
    node_id: int
    registry_url: str | None = None  # this node's schema registry, when it runs one
    connect_urls: tuple[str, ...] = ()  # Kafka Connect REST APIs for the Connectors page (console.connect.urls)
    counters: BrokerCounters | None = None  # this node's own traffic counters (the throughput charts' bytes)
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)  # background work to end
    signin: SignIn = field(init=False)  # sessions of signed-in users on a secured cluster (signin.py)
    throughput: Samplers = field(init=False)  # each user's throughput sampler (charts, the topics' message rates)

    def __post_init__(self) -> None:
        self.signin = SignIn(self.clients)
        self.throughput = Samplers(self.counters)
        self.on_stop.append(self.throughput.stop_all)
        self.on_stop.append(self.clients.close_all)  # the users' open connections must not outlive the broker

    def clients_for(self, request: Request) -> ConsoleClients:
        """The clients acting for the request's user (set by the sign-in middleware on secured clusters)."""
        credentials: Credentials | None = getattr(request.state, "credentials", None)
        return self.clients.for_user(credentials)

    def render(self, request: Request, template: str, status_code: int = 200, **values: Any) -> Response:
        """A page (or an htmx fragment) from `templates/`; every template sees `node_id` and `user`."""
        credentials: Credentials | None = getattr(request.state, "credentials", None)
        values.setdefault("node_id", self.node_id)
        values.setdefault("user", credentials.username if credentials else None)
        return self.templates.TemplateResponse(request, template, values, status_code=status_code)


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    templates.env.filters["bytes"] = _human_bytes
    # One path segment, `/` included (Jinja's `urlencode` keeps slashes): group ids may hold any character.
    templates.env.filters["segment"] = lambda value: quote(str(value), safe="")
    return templates


def _human_bytes(value: int | float | None) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
