"""BrokerRegistration (key 62): a broker joins the cluster, fenced until it has caught up (controller only).

The answer is the broker epoch: the metadata offset of the registration record, larger for every new
incarnation, which the broker names in each heartbeat. A second live process with the same broker id is
refused with DUPLICATE_BROKER_REGISTRATION.
"""

from __future__ import annotations

from typing import Any

from moldau.metadata.controller import Controller
from moldau.metadata.records import Endpoint
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE

_SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await serve(ctx.broker.controller, ctx.broker.cluster_id, request, ctx.schema.response_type)


async def serve(controller: Controller, cluster_id: str, request: Any, response_type: Any) -> Any:
    if request.cluster_id != cluster_id:
        return _answer(response_type, ErrorCode.inconsistent_cluster_id, -1)
    endpoints = tuple(Endpoint(lst.name, lst.host, lst.port, _SECURITY_PROTOCOLS.get(lst.security_protocol,
                                                                                      "PLAINTEXT"))
                      for lst in request.listeners)
    try:
        # log_dirs from v2 (KIP-858): the broker's online directories.
        online_dirs = [str(d) for d in getattr(request, "log_dirs", ()) if d is not None]
        # previous_broker_epoch from v3 (KIP-966): the epoch of the broker's last clean shutdown, -1 if none.
        epoch = await controller.register_broker(request.broker_id, request.incarnation_id, endpoints,
                                                 request.rack, online_dirs,
                                                 getattr(request, "previous_broker_epoch", -1))
    except KafkaError as exc:
        return _answer(response_type, exc.code, -1)
    return _answer(response_type, ErrorCode.none, epoch)


def _answer(response_type: Any, code: ErrorCode, epoch: int) -> Any:
    return make(response_type, throttle_time=NO_THROTTLE, error_code=code, broker_epoch=epoch)


API = Api(key=62, name="BrokerRegistration", min_version=0, max_version=4, handle=handle)
