"""How a node reaches the active controller: in-process when it is the controller, over the network otherwise.

Brokers send BrokerRegistration, BrokerHeartbeat, AllocateProducerIds and forwarded admin requests (CreateTopics
and friends) to the active controller's controller listener, as Kafka brokers do. The leader is whoever the
metadata quorum says it is; when none is known yet, or the call fails, the channel waits and tries again until
its deadline, so a controller failover is invisible to callers that can wait. Each attempt takes at most
controller.socket.timeout.ms, and ends at once when the quorum's leadership moves while it waits: an answer from
a node that is no longer the controller would be refused anyway, and a controller that hangs rather than dies
would otherwise hold every call for the whole attempt.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from moldau.metadata.quorum import MetadataQuorum
from moldau.net.client import Authenticator, ConnectionFailed, ConnectionPool
from moldau.net.timeouts import InterBrokerTimeouts
from moldau.protocol.errors import ErrorCode
from moldau.security.client_security import PLAINTEXT, ClientSecurity

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.05
SLOW_CALL_WARNING_S = 5.0

LocalHandler = Callable[[Any], Awaitable[Any]]


def not_controller_in(response: Any) -> bool:
    """True if any error code in the response is NOT_CONTROLLER: it reached a node that just lost leadership."""
    if isinstance(response, tuple):
        return any(not_controller_in(item) for item in response)
    fields = getattr(response, "__dataclass_fields__", None)
    if fields is None:
        return False
    if getattr(response, "error_code", None) == ErrorCode.not_controller:
        return True
    return any(not_controller_in(getattr(response, name)) for name in fields
               if isinstance(getattr(response, name), tuple))


class ControllerUnavailable(Exception):
    """No active controller answered before the deadline."""


class ControllerChannel:
    def __init__(self, quorum: MetadataQuorum, client_id: str, security: ClientSecurity = PLAINTEXT,
                 authenticator: Authenticator | None = None, timeouts: InterBrokerTimeouts | None = None) -> None:
        self._quorum = quorum
        self._timeouts = timeouts or InterBrokerTimeouts()
        self._pool = ConnectionPool(client_id, security, authenticator, self._timeouts.setup)
        self._leadership_moved = asyncio.Event()  # replaced at each move; attempts waiting on the old one end
        quorum.add_leadership_listener(self._on_leadership_moved)

    def _on_leadership_moved(self) -> None:
        moved, self._leadership_moved = self._leadership_moved, asyncio.Event()
        moved.set()

    async def call(self, request: Any, local: LocalHandler | None, timeout_s: float,
                   retry_if: Callable[[Any], bool] = lambda response: False) -> Any:
        """Send `request` to the active controller and return its response.

        `local` serves the request in-process when this node is the active controller. `retry_if(response)`
        says that the answer came from a node that just lost leadership (NOT_CONTROLLER): try again.
        Raises ControllerUnavailable at the deadline.
        """
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + timeout_s
        warned = False
        while True:
            response = await self._try_once(request, local, max(0.01, deadline - loop.time()))
            if response is not None and not retry_if(response):
                return response
            if not warned and loop.time() - started >= SLOW_CALL_WARNING_S:
                warned = True  # once per call: each attempt's own failure is only logged at DEBUG
                log.warning("no answer from the active controller (%s) to %s after %.1f s; still trying",
                            self._quorum.leader_address(), type(request).__name__, loop.time() - started)
            if loop.time() + RETRY_BACKOFF_S >= deadline:
                raise ControllerUnavailable(f"no active controller answered {type(request).__name__} "
                                            f"within {timeout_s:.1f} s")
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _try_once(self, request: Any, local: LocalHandler | None, timeout_s: float) -> Any:
        if local is not None and self._quorum.is_active_controller():
            return await local(request)
        address = self._quorum.leader_address()
        if address is None or address.node_id == self._quorum.node_id:
            return None  # no leader known, or we are a leader still replaying: wait
        attempt = asyncio.ensure_future(self._pool.request(
            address.host, address.port, request, min(timeout_s, self._timeouts.controller_attempt_s)))
        try:
            await self._while_leading(attempt, address.node_id)
        finally:
            if not attempt.done():
                attempt.cancel()  # leadership left that node, or the caller gave up: the answer is not wanted
        if not attempt.done() or attempt.cancelled():
            log.debug("leadership left controller %d while it had %s", address.node_id, type(request).__name__)
            return None
        try:
            return attempt.result()
        except (ConnectionFailed, TimeoutError) as exc:
            log.debug("controller %d did not answer %s: %s", address.node_id, type(request).__name__, exc)
            return None

    async def _while_leading(self, attempt: asyncio.Future[Any], node_id: int) -> None:
        """Wait for `attempt` to end, or for the quorum's leadership to leave `node_id`."""
        while not attempt.done():
            moved = asyncio.ensure_future(self._leadership_moved.wait())
            try:
                await asyncio.wait((attempt, moved), return_when=asyncio.FIRST_COMPLETED)
            finally:
                moved.cancel()
            if self._quorum.leader_id != node_id:
                return

    def close(self) -> None:
        self._pool.close()
