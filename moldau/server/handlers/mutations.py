"""Admin requests that create or delete partitions, under the controller mutation quota (KIP-599).

CreateTopics, CreatePartitions and DeleteTopics ask `mutation_quota` for the client's `controller_mutation_rate`
quota. Without one (or for a `validate_only` request, which mutates nothing) they serve the request as a whole.
With one, `serve_metered` serves it one topic at a time: each topic is checked against the quota before its
mutation, so in strict mode the topics after the one that exceeded it are answered THROTTLING_QUOTA_EXCEEDED,
and a topic that fails gives its partitions back, so only partitions actually created or deleted count. The
response's throttle time comes from the quota (see `moldau.security.mutation_quota`); dispatch then mutes the
connection for it, as for every client quota.

The quota is accounted on the node that received the client's request rather than on the active controller:
that node knows the client's principal and client id, which a forwarded request no longer carries (it reaches
the controller from the node, on the controller listener), and it holds the connection to throttle. As with the
other client quotas, a client spreading its requests over several brokers has an allowance on each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.mutation_quota import MutationQuota
from moldau.server.context import RequestContext
from moldau.server.handlers.common import NO_THROTTLE


@dataclass(frozen=True, slots=True)
class Mutations:
    """How one admin API lists its topics and answers them, for `serve_metered`."""

    items_field: str  # the request's list of topics
    results_field: str  # the response's list of results, one per topic, in order
    key: Callable[[Any], object]  # what identifies a topic entry, to find one named twice
    refusal: Callable[[Any], Any | None]  # the result of an entry the principal may not change, else None
    count: Callable[[Any], int]  # the partitions an entry would create or delete, read before it runs
    duplicate: Callable[[Any], Any]  # the result of an entry named twice in the request
    throttled: Callable[[Any, str], Any]  # the result of an entry the quota refuses, with its message
    serve: Callable[[RequestContext, Any], Awaitable[Any]]  # serves a request of some of the entries


def mutation_quota(ctx: RequestContext, strict_since: int) -> MutationQuota | None:
    """The client's mutation quota for this request: strict from version `strict_since`, permissive before;
    None when no `controller_mutation_rate` applies to the client (or the request came from another node)."""
    return ctx.quota.mutation_quota(ctx.version >= strict_since, ctx.broker.clock.monotonic_ms())


async def serve_metered(ctx: RequestContext, request: Any, quota: MutationQuota, api: Mutations) -> Any:
    """Serve the request topic by topic against `quota`, and set the client's throttle time."""
    entries = getattr(request, api.items_field)
    named = Counter(api.key(entry) for entry in entries)
    results = []
    for entry in entries:
        # As without the quota: authorization first, then entries named twice; neither reaches the quota.
        refused = api.refusal(entry)
        if refused is not None:
            results.append(refused)
        elif named[api.key(entry)] > 1:
            results.append(api.duplicate(entry))
        else:
            results.append(await _serve_one(ctx, request, quota, api, entry))
    ctx.quota.throttle(quota.throttle_ms(ctx.broker.clock.monotonic_ms()))
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, **{api.results_field: tuple(results)})


async def _serve_one(ctx: RequestContext, request: Any, quota: MutationQuota, api: Mutations, entry: Any) -> Any:
    clock = ctx.broker.clock
    mutations = api.count(entry)
    wait_ms = quota.admit(mutations, clock.monotonic_ms())
    if wait_ms > 0:
        return api.throttled(entry, f"the controller mutation quota ({quota.rate:g} partitions per second) is "
                                    f"exceeded; retry in {wait_ms} ms")
    response = await api.serve(ctx, replace(request, **{api.items_field: (entry,)}))
    result = getattr(response, api.results_field)[0]
    if result.error_code != ErrorCode.none:
        quota.give_back(mutations, clock.monotonic_ms())
    return result
