"""Small pieces several handlers share."""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from moldau.metadata.raft_wire import WireError
from moldau.protocol.codec import InvalidRequest, make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.context import RequestContext

# kio models throttle times as timedeltas.
NO_THROTTLE = datetime.timedelta(0)
NO_THROTTLE_MS = 0

# Kafka's sentinel for "authorized operations not requested".
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def requested_operations(ctx: RequestContext, request: Any, flag: str, resource_type: ResourceType,
                         name: str) -> int:
    """KIP-430: the resource's authorized operations when the request's `flag` asks for them and an authorizer
    decides them, else "omitted"."""
    if not getattr(request, flag, False):
        return AUTHORIZED_OPERATIONS_OMITTED
    operations = ctx.authorized_operations(resource_type, name)
    return AUTHORIZED_OPERATIONS_OMITTED if operations is None else operations


def error_message(code_name: str, message: str | None) -> str | None:
    """Kafka sends no message when there is no error."""
    return None if code_name == "none" else message


def datetime_from_ms(timestamp_ms: int) -> datetime.datetime | None:
    """kio models i64 timestamps as aware datetimes, and -1 ("none") as None."""
    if timestamp_ms < 0:
        return None
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000.0, tz=datetime.UTC)


def ms_from_timedelta(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)  # int() would turn 16.266 s into 16265 ms
    return int(value)


def reads_committed(request: Any) -> bool:
    """Whether a Fetch (v4+) or ListOffsets (v2+) request asks for isolation level 1, READ_COMMITTED;
    older versions have no isolation level and read uncommitted."""
    return bool(getattr(request, "isolation_level", 0) == 1)


def quorum_answer(handle: Callable[[Any], Any], request: Any) -> Any:
    """A quorum request's answer; a request that breaks the quorum protocol (`WireError`) closes the connection,
    as any malformed request does."""
    try:
        return handle(request)
    except WireError as exc:
        raise InvalidRequest(str(exc)) from exc


async def forward_authorized(ctx: Any, request: Any, items_field: str, results_field: str,
                             refusals: dict[int, Any]) -> Any:
    """Forward an admin request to the active controller without the items this node refused (authorization is
    checked here, where the client's principal is known); the refused items' results are put back in their places.

    `refusals` maps an item's index in `request.<items_field>` to its ready-made error result. Returns the merged
    response, or None when the handler is to answer here (this node is the active controller, or no controller
    answered); it then answers the refused items from `refusals` itself.
    """
    items = getattr(request, items_field)
    kept = tuple(item for i, item in enumerate(items) if i not in refusals)
    if not kept and items:
        # Everything refused: nothing to ask the controller.
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE,
                    **{results_field: tuple(refusals[i] for i in range(len(items)))})
    forwarded = await ctx.broker.forward_to_controller(ctx, replace(request, **{items_field: kept})
                                                       if refusals else request)
    if forwarded is None or not refusals:
        return forwarded
    answered = iter(getattr(forwarded, results_field))
    return replace(forwarded, **{results_field: tuple(refusals[i] if i in refusals else next(answered)
                                                      for i in range(len(items)))})


async def alter_cluster(ctx: RequestContext, request: Any, change: Callable[[], Awaitable[None]]) -> Any:
    """The course of an operator request that changes the cluster and answers one error code and message
    (UnregisterBroker, AddRaftVoter, RemoveRaftVoter): ALTER on the cluster, forwarded to the active controller
    from a node that is not it, then `change` made there; its KafkaError is the answer."""
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _single_error(ctx, ErrorCode.cluster_authorization_failed, f"{ctx.principal} may not ALTER the cluster")
    forwarded = await ctx.broker.forward_to_controller(ctx, request)
    if forwarded is not None:
        return forwarded
    try:
        await change()
    except KafkaError as exc:
        return _single_error(ctx, exc.code, exc.message)
    return _single_error(ctx, ErrorCode.none, None)


def _single_error(ctx: RequestContext, code: ErrorCode, message: str | None) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code, error_message=message)
