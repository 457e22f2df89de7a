"""`/groups` and `/groups/<name>`: consumer groups (classic and consumer protocol) and share groups, their members
and lag, refreshed live by htmx; resetting a group's offsets and deleting a group (after typing its name)."""

from __future__ import annotations

from urllib.parse import quote

from confluent_kafka import KafkaError, KafkaException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from moldau.cli.common import parse_time
from moldau.console.context import ConsoleContext
from moldau.console.errors import ConsoleError, kafka_error_status
from moldau.console.forms import form_fields
from moldau.console.groups import (
    FORM_RESET_MODES,
    ResetTarget,
    delete_group,
    describe_group,
    list_groups,
    reset_offsets,
)
from moldau.registry.http import slashes  # noqa: F401  (registers the `segment` path convertor)
from moldau.text import ascii_digits

__all__ = ["reset_target", "routes"]


def reset_target(form: dict[str, str]) -> tuple[str | None, ResetTarget]:
    """The topic (None: all the group's) and target of the reset form; ConsoleError 400 for bad input."""
    mode = form.get("to", "")
    if mode not in FORM_RESET_MODES:
        raise ConsoleError(400, f"choose where to reset to: {', '.join(FORM_RESET_MODES)}")
    topic = form.get("topic", "").strip() or None
    if mode == "offset":
        text = form.get("offset", "").strip()
        if not ascii_digits(text):
            raise ConsoleError(400, f"the offset must be a number of 0 or more, not {text!r}")
        return topic, ResetTarget(mode, offset=int(text))
    if mode == "timestamp":
        text = form.get("timestamp", "").strip()
        try:
            return topic, ResetTarget(mode, timestamp_ms=parse_time(text))
        except Exception:
            raise ConsoleError(400, f"the time must be ISO 8601 (UTC unless it names a zone) or epoch "
                                    f"milliseconds, not {text!r}") from None
    return topic, ResetTarget(mode)


# How brokers refuse to change a group that has members: classic groups answer a commit from outside the group
# with UNKNOWN_MEMBER_ID, DeleteGroups and share groups with NON_EMPTY_GROUP.
HAS_MEMBERS = frozenset({"UNKNOWN_MEMBER_ID", "NON_EMPTY_GROUP", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS",
                         "STALE_MEMBER_EPOCH"})


def _failure(exc: Exception) -> tuple[int, str]:
    """The status and message to show next to the form: the broker's error, with what to do about it."""
    if isinstance(exc, ConsoleError):
        return exc.status, exc.message
    if isinstance(exc, KafkaException) and isinstance(exc.args[0], KafkaError):
        error: KafkaError = exc.args[0]
        message = f"{error.name()}: {error.str()}"
        if error.name() in HAS_MEMBERS:
            return 409, f"{message}. Kafka allows this only while the group has no members: stop its consumers first."
        return kafka_error_status(error), message
    raise exc


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    async def index(request: Request) -> Response:
        groups = await list_groups(ctx.clients_for(request))
        if request.headers.get("hx-request"):
            return ctx.render(request, "groups/_table.html", groups=groups)
        return ctx.render(request, "groups/index.html", groups=groups,
                          deleted=request.query_params.get("deleted"))

    async def detail(request: Request, status_code: int = 200, **values: object) -> Response:
        name = request.path_params["name"]
        group = await describe_group(ctx.clients_for(request), name)
        return ctx.render(request, "groups/detail.html", status_code=status_code, group=group,
                          reset_notice=request.query_params.get("reset"), **values)

    async def live(request: Request) -> Response:
        group = await describe_group(ctx.clients_for(request), request.path_params["name"])
        return ctx.render(request, "groups/_live.html", group=group)

    async def reset(request: Request) -> Response:
        name = request.path_params["name"]
        form = await form_fields(request)
        try:
            topic, target = reset_target(form)
            changed = await reset_offsets(ctx.clients_for(request), name, topic, target)
        except (ConsoleError, KafkaException) as exc:
            status, message = _failure(exc)
            # The page again, with the broker's reason next to the form (NON_EMPTY_GROUP while it has members).
            return await detail(request, status, reset_error=message, form=form)
        return RedirectResponse(f"/groups/{quote(name, safe='')}?reset={len(changed)}", status_code=303)

    async def delete(request: Request) -> Response:
        name = request.path_params["name"]
        form = await form_fields(request)
        try:
            if form.get("confirm", "") != name:
                raise ConsoleError(400, f"type the group's name, {name}, to delete it")
            await delete_group(ctx.clients_for(request), name)
        except (ConsoleError, KafkaException) as exc:
            status, message = _failure(exc)
            return await detail(request, status, delete_error=message)
        return RedirectResponse(f"/groups?deleted={quote(name, safe='')}", status_code=303)

    # A group id may hold any character, `/` included: links send it as one encoded segment (the `segment`
    # filter) and `{name:segment}` reads it back whole (moldau.registry.http.slashes), so `a/live` is a group's
    # name and never the live fragment of group `a`.
    return [
        Route("/groups", index, methods=["GET"]),
        Route("/groups/{name:segment}", detail, methods=["GET"]),
        Route("/groups/{name:segment}/live", live, methods=["GET"]),
        Route("/groups/{name:segment}/reset", reset, methods=["POST"]),
        Route("/groups/{name:segment}/delete", delete, methods=["POST"]),
    ]
