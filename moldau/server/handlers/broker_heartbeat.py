"""BrokerHeartbeat (key 63): a broker says it is alive and how far it has replayed the metadata (controller only).

The controller unfences a broker that has caught up with its own registration, fences one that asks for it,
and walks a broker through controlled shutdown (fenced, leaderships moved, then told it may stop). From v1 the
broker names its failed log directories (OfflineLogDirs, KIP-858): the replicas in them leave their ISRs and
leadership. v2 (cordoned log directories, KIP-1066) is Kafka 4.3's, so it is not advertised.
"""

from __future__ import annotations

from typing import Any

from moldau.metadata.controller import Controller
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await serve(ctx.broker.controller, request, ctx.schema.response_type)


async def serve(controller: Controller, request: Any, response_type: Any) -> Any:
    try:
        decision = await controller.broker_heartbeat(request.broker_id, request.broker_epoch,
                                                     request.current_metadata_offset, request.want_fence,
                                                     request.want_shut_down,
                                                     [str(d) for d in getattr(request, "offline_log_dirs", ())
                                                      if d is not None])
    except KafkaError as exc:
        return make(response_type, throttle_time=NO_THROTTLE, error_code=exc.code, is_caught_up=False,
                    is_fenced=True, should_shut_down=False)
    return make(response_type, throttle_time=NO_THROTTLE, error_code=decision.error or ErrorCode.none,
                is_caught_up=decision.is_caught_up, is_fenced=decision.is_fenced,
                should_shut_down=decision.should_shut_down)


API = Api(key=63, name="BrokerHeartbeat", min_version=0, max_version=1, handle=handle)
