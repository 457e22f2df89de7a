"""What a node asks of the active controller on behalf of clients and its coordinators.

- Forwarding: a client's admin request that arrives at a node that is not the active controller is sent on to
  it over the controller channel, and answered with the controller's answer once this node has applied the
  change (so the client's next request here sees it).
- Topic creation: auto-created topics and the coordinators' internal topics go through the active controller,
  here or remote.
- Producer ids: handed out from blocks the controller reserves (AllocateProducerIds), one block at a time.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable
from typing import Any

import kio.schema.allocate_producer_ids.v0.request as apid_req
import kio.schema.allocate_producer_ids.v0.response as apid_resp
import kio.schema.create_topics.v7.request as ct_req

from moldau.metadata.controller import Controller
from moldau.metadata.quorum import MetadataQuorum
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server import envelope
from moldau.server.context import RequestContext
from moldau.server.controller_channel import ControllerChannel, ControllerUnavailable, not_controller_in
from moldau.server.handlers import allocate_producer_ids

log = logging.getLogger(__name__)

FORWARD_TIMEOUT_S = 15.0


class ControllerRequests:
    def __init__(self, node_id: int, quorum: MetadataQuorum, controller: Controller, channel: ControllerChannel,
                 broker_epoch: Callable[[], int]) -> None:
        self._node_id = node_id
        self._quorum = quorum
        self._controller = controller
        self._channel = channel
        self._broker_epoch = broker_epoch
        self._producer_ids = range(0)
        self._producer_id_next = 0
        self._producer_id_lock = asyncio.Lock()

    # -- forwarding ---------------------------------------------------------------------------------------------

    async def forward_to_controller(self, ctx: RequestContext, request: Any) -> Any:
        """The active controller's answer to a client's admin request, or None to answer it here.

        None when this node is the active controller, when the request was itself forwarded (it came in on the
        controller listener), or when no controller answered in time: then the handler runs here and reports
        NOT_CONTROLLER per item, which clients retry. After a forwarded change, wait until this node has
        applied it, so the client's next request here sees it.
        """
        if ctx.on_controller_listener or self._quorum.is_active_controller():
            return None
        try:
            return await self._forward(request)
        except ControllerUnavailable as exc:
            log.warning("cannot forward %s: %s", type(request).__name__, exc)
            return None

    async def forward_enveloped(self, ctx: RequestContext, request: Any) -> Any:
        """As `forward_to_controller`, for a request the controller must decide as the client (delegation tokens):
        sent inside an Envelope with the client's principal and address (moldau.server.envelope). Raises KafkaError
        when the controller refuses the envelope."""
        if ctx.on_controller_listener or self._quorum.is_active_controller():
            return None
        try:
            response = await self._forward(envelope.wrap(request, ctx.principal, ctx.client_host,
                                                         ctx.header.client_id or ""))
        except ControllerUnavailable as exc:
            log.warning("cannot forward %s: %s", type(request).__name__, exc)
            return None
        return envelope.unwrap(response, request)

    async def _forward(self, request: Any) -> Any:
        """The remote active controller's answer, once this node has applied the change. Raises
        ControllerUnavailable."""
        response = await self._channel.call(request, None, FORWARD_TIMEOUT_S, retry_if=not_controller_in)
        if not await self._quorum.wait_until_caught_up(FORWARD_TIMEOUT_S):
            log.warning("answering %s before applying the controller's change: the metadata log was not caught "
                        "up within %.0f s", type(request).__name__, FORWARD_TIMEOUT_S)
        return response

    # -- topic creation -----------------------------------------------------------------------------------------

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: dict[str, str]) -> None:
        """Create a topic through the active controller (here or remote). Raises KafkaError."""
        if self._quorum.is_active_controller():
            await self._controller.create_topic(name, partitions, replication_factor, {}, configs)
            return
        try:
            response = await self._forward(create_topics_request(name, partitions, replication_factor, configs))
        except ControllerUnavailable as exc:
            raise KafkaError(ErrorCode.leader_not_available, str(exc)) from exc
        result = response.topics[0]
        if result.error_code != ErrorCode.none:
            raise KafkaError(ErrorCode(result.error_code), result.error_message or "")

    # -- producer ids -------------------------------------------------------------------------------------------

    async def next_producer_id(self) -> int:
        """A fresh producer id from a block reserved through the controller. Raises KafkaError."""
        async with self._producer_id_lock:
            if self._producer_id_next >= self._producer_ids.stop:
                first, count = await self._allocate_producer_ids()
                self._producer_ids = range(first, first + count)
                self._producer_id_next = first
            self._producer_id_next += 1
            return self._producer_id_next - 1

    async def _allocate_producer_ids(self) -> tuple[int, int]:
        request = make(apid_req.AllocateProducerIdsRequest, broker_id=self._node_id,
                       broker_epoch=self._broker_epoch())

        async def local(req: Any) -> Any:
            return await allocate_producer_ids.serve(self._controller, req, apid_resp.AllocateProducerIdsResponse)

        try:
            response = await self._channel.call(request, local, FORWARD_TIMEOUT_S, retry_if=not_controller_in)
        except ControllerUnavailable as exc:
            raise KafkaError(ErrorCode.coordinator_not_available, str(exc)) from exc
        if response.error_code != ErrorCode.none:
            raise KafkaError(ErrorCode.coordinator_not_available,
                             f"the controller refused producer ids: {ErrorCode(response.error_code).name}")
        return response.producer_id_start, response.producer_id_len


def create_topics_request(name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> Any:
    topic = make(ct_req.CreatableTopic, name=name, num_partitions=partitions, replication_factor=replication_factor,
                 assignments=(), configs=tuple(make(ct_req.CreatableTopicConfig, name=k, value=v)
                                               for k, v in configs.items()))
    return make(ct_req.CreateTopicsRequest, topics=(topic,), timeout=datetime.timedelta(seconds=30),
                validate_only=False)
