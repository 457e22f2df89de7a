"""What AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter (KIP-853) share: reading the voter a request names,
and the checks every one of them makes first."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.raft import Endpoint, VoterInfo
from moldau.server.context import RequestContext
from moldau.server.handlers.common import alter_cluster

MAX_TIMEOUT_S = 60.0
# RemoveRaftVoter and UpdateRaftVoter carry no timeout: wait less than a client's usual request timeout, so a
# change that cannot go through yet is answered (REQUEST_TIMED_OUT, retriable) rather than abandoned.
DEFAULT_TIMEOUT_S = 10.0


def voter_from_request(ctx: RequestContext, request: Any) -> VoterInfo:
    """The voter a request describes. Raises INVALID_REQUEST without an endpoint on the controller listener, which
    is the one the quorum talks on."""
    if request.voter_id < 0:
        raise KafkaError(ErrorCode.invalid_request, f"invalid voter id {request.voter_id}")
    endpoints = tuple(Endpoint(str(e.name).upper(), str(e.host), int(e.port)) for e in request.listeners)
    listener = ctx.broker.quorum.listener_name
    if not any(e.name == listener and e.port > 0 for e in endpoints):
        raise KafkaError(ErrorCode.invalid_request,
                         f"the voter needs an endpoint for the controller listener {listener}")
    return VoterInfo(int(request.voter_id), directory_id(request.voter_directory_id), endpoints)


def directory_id(value: uuid.UUID | None) -> uuid.UUID | None:
    """A directory id from the wire; the zero UUID means none."""
    return None if value is None or value.int == 0 else value


def timeout_s(value: datetime.timedelta | int | None) -> float:
    """The request's timeout, bounded: a client may send 0 or an absurd value."""
    if value is None:
        return DEFAULT_TIMEOUT_S
    seconds = value.total_seconds() if isinstance(value, datetime.timedelta) else value / 1000
    return min(max(seconds, 0.1), MAX_TIMEOUT_S)


def check_cluster(ctx: RequestContext, request: Any) -> None:
    """Raises INCONSISTENT_CLUSTER_ID for a request meant for another cluster."""
    if not ctx.broker.quorum.check_cluster_id(request.cluster_id):
        raise KafkaError(ErrorCode.inconsistent_cluster_id, f"this is cluster {ctx.broker.quorum.cluster_id}")


async def change_voters(ctx: RequestContext, request: Any, change: Callable[[], Awaitable[None]]) -> Any:
    """AddRaftVoter's and RemoveRaftVoter's common course: the course of every cluster change
    (`common.alter_cluster`), the cluster id checked before `change` is made."""
    async def checked() -> None:
        check_cluster(ctx, request)
        await change()

    return await alter_cluster(ctx, request, checked)
