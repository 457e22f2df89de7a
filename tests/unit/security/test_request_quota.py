"""request_percentage and KIP-219 in dispatch: handler run time is counted (not waiting), the response carries
the throttle time, and the connection is told to mute."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

from moldau.clock import ManualClock
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import ClientQuotaRecord
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.quotas import REQUEST_PERCENTAGE, ClientQuotas, QuotaConfig, TimedCoroutine, entity_key
from moldau.server.context import RequestContext
from moldau.server.dispatch import Dispatcher
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE
from tests.unit.server.test_dispatch import FakeConnection, FakeServices, decode, encode


def test_timed_coroutine_counts_running_time_not_waiting() -> None:
    clock = ManualClock()

    async def handler() -> str:
        clock.advance(30)  # working
        await asyncio.sleep(0.01)  # waiting: another task may advance the clock meanwhile
        clock.advance(20)
        return "done"

    async def run() -> None:
        async def other() -> None:
            await asyncio.sleep(0)
            clock.advance(1000)  # someone else's time
        timed = TimedCoroutine(handler(), clock.monotonic_ms)
        result, _ = await asyncio.gather(timed, other())
        assert result == "done"
        assert timed.elapsed_ms == 50
    asyncio.run(run())


@dataclass
class MutedConnection(FakeConnection):
    muted: list[int] = field(default_factory=list)

    def mute_for(self, ms: int) -> None:
        self.muted.append(ms)


def test_a_client_over_its_request_percentage_gets_a_throttle_time_and_is_muted() -> None:
    services = FakeServices(MetadataImage().apply(
        [ClientQuotaRecord(entity_key(client_id="test"), REQUEST_PERCENTAGE, 10.0)], 0))
    clock: ManualClock = services.clock

    async def handle(ctx: RequestContext, request: Any) -> Any:
        clock.advance(500)  # half a second of handling: 10% of a thread is 100 ms/s
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                    error_message=None, node_id=1, host="h", port=1)

    apis = {10: Api(key=10, name="FindCoordinator", min_version=0, max_version=3, handle=handle)}
    quotas = ClientQuotas(QuotaConfig(window_num=2, window_size_ms=1000))
    dispatcher = Dispatcher(services, apis=apis, quotas=quotas)  # type: ignore[arg-type]
    conn = MutedConnection()
    response = decode(asyncio.run(dispatcher.handle_frame(encode(FindCoordinatorRequest(key="g")), conn)), 10, 3)
    # 500 ms over a span of at least one 1 s window: 500 ms/s against 100 ms/s -> (500-100)/100 * 1 s.
    throttle_ms = round(response.throttle_time.total_seconds() * 1000)
    assert throttle_ms == 2000  # capped at the span, 2 windows
    assert conn.muted == [2000]
    # Another client id is not limited.
    other = encode(FindCoordinatorRequest(key="g")).replace(b"test", b"tset")
    response = decode(asyncio.run(dispatcher.handle_frame(other, MutedConnection())), 10, 3)
    assert response.throttle_time.total_seconds() == 0
