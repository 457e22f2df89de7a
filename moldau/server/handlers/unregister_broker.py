"""UnregisterBroker (key 64): remove a broker that is gone for good from the cluster's registrations (KIP-631).

The broker must be fenced (shut down, or silent past `broker.session.timeout.ms`); a live broker is refused
with INVALID_REQUEST, and an id with no registration gets BROKER_ID_NOT_REGISTERED. Its partitions keep it as a
replica (offline) until they are reassigned. Needs ALTER on the cluster; forwarded to the active controller,
which commits an UnregisterBrokerRecord.
"""

from __future__ import annotations

from typing import Any

from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import alter_cluster


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await alter_cluster(ctx, request, lambda: ctx.broker.controller.unregister_broker(request.broker_id))


API = Api(key=64, name="UnregisterBroker", min_version=0, max_version=0, handle=handle)
