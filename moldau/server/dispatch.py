"""Request dispatch: one frame in, the encoded response (or nothing) out.

Every request a node serves passes through `Dispatcher.handle_frame`, in this order:

0. on a SASL listener, the connection's authenticator (`moldau.security.sasl`) takes bare tokens of the legacy
   unframed exchange, and refuses (closing the connection) requests that are illegal before authentication;
1. the header is parsed and the API looked up among those of the listener it came in on (client listeners
   serve `APIS`, controller listeners `CONTROLLER_APIS`); an unknown API or version closes the connection,
   except ApiVersions, which answers UNSUPPORTED_VERSION with the ranges served so the client can pick one;
2. the body is bounds-checked and decoded (`codec.decode_request`, or the API's own decoder); a malformed body
   is answered with INVALID_REQUEST where the response has a top-level error code, else the connection closes;
3. the request filters run: with an authorizer, `RequestAuthorization` refuses requests whose whole-request
   check fails (moldau.security.acl.rules); checks per topic or group are the handlers'. On a controller
   listener a principal allowed CLUSTER_ACTION on the cluster is another node (`RequestContext.from_node`),
   whose requests are not checked further; anyone else is an admin client, checked like on other listeners;
4. the handler runs with a `RequestContext` whose `broker` is the narrow `BrokerServices` interface; when
   client quotas are configured, its `quota` records the bytes Produce and Fetch move (and the partitions that
   CreateTopics, CreatePartitions and DeleteTopics create or delete), the handler puts the throttle time in its
   response, and the connection is muted for that time once the response is out (KIP-219; see
   `moldau.security.quotas`);
   A handler may return a `codec.DeferredBody` (an acks=all Produce waiting for its followers): dispatch then
   returns a `codec.PendingResponse`, and the connection serves its next requests while it waits, writing the
   responses in request order;
5. a `KafkaError` a handler (or a filter) left unanswered becomes the response's top-level error code where it
   has one, else the connection closes; any other exception gets a note naming the request and closes the
   connection (`KafkaConnection` logs it).

No sockets here: the dispatcher takes bytes and returns bytes, so it is tested in process (tests/unit/server).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from moldau.metrics.counters import BrokerCounters
from moldau.protocol import codec
from moldau.protocol.codec import InvalidRequest
from moldau.protocol.error_response import error_response
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.framing import Frame
from moldau.protocol.wire import ResponsePart
from moldau.security.acl.authorizer import Authorizer
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.security.principal import KafkaPrincipal
from moldau.security.quotas import NO_QUOTA, REQUEST_PERCENTAGE, ClientQuotas, RequestQuota, TimedCoroutine
from moldau.security.sasl.authenticator import SaslAuthenticator, bare_sasl_token
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.api_versions import unsupported_version_response
from moldau.server.handlers.common import ms_from_timedelta
from moldau.server.handlers.registry import APIS, CONTROLLER_APIS
from moldau.server.services import BrokerServices

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18

Response = list[ResponsePart]


class ConnectionInfo(Protocol):
    """What dispatch needs to know of the connection a frame came in on."""

    @property
    def peer(self) -> str: ...
    @property
    def listener(self) -> str: ...
    @property
    def is_controller_listener(self) -> bool: ...
    @property
    def principal(self) -> KafkaPrincipal: ...
    @property
    def client_host(self) -> str: ...
    @property
    def security_protocol(self) -> str: ...


@runtime_checkable
class Mutable(Protocol):
    """A connection that can be muted (not read from) for a throttle time after its response (KIP-219)."""

    def mute_for(self, ms: int) -> None: ...


class RequestFilter(Protocol):
    """A check every decoded request passes before its handler runs.

    Raising `KafkaError` refuses the request: it is answered like an error a handler left unanswered (the
    top-level error code, where the response has one). The ACL check of whole requests is one.
    """

    async def check(self, ctx: RequestContext, request: Any) -> None: ...


class Dispatcher:
    def __init__(self, services: BrokerServices, filters: Sequence[RequestFilter] = (),
                 apis: Mapping[int, Api] = APIS, controller_apis: Mapping[int, Api] = CONTROLLER_APIS,
                 quotas: ClientQuotas | None = None, authorizer: Authorizer | None = None,
                 counters: BrokerCounters | None = None) -> None:
        self._services = services
        self._counters = counters
        self._quotas = quotas
        self._authorizer = authorizer
        self._filters = tuple(filters)
        self._apis = apis
        self._controller_apis = controller_apis

    async def handle_frame(self, frame: Frame, conn: ConnectionInfo) -> Response | codec.PendingResponse | None:
        """The response frame's pieces (without the size prefix), or None when no response is sent; for a handler
        that finishes its response later (`codec.DeferredBody`), a `codec.PendingResponse` that will hold them.

        Raises InvalidRequest (or another exception) when the connection must close instead.
        """
        sasl: SaslAuthenticator | None = getattr(conn, "sasl", None)
        if sasl is not None and sasl.expects_bare_token:
            return await bare_sasl_token(sasl, frame)  # the unframed exchange after SaslHandshake v0
        header = codec.parse_request_header(frame)
        if sasl is not None:
            sasl.check_request(header.api_key)  # before authentication only ApiVersions and SASL; else it closes
        apis = self._controller_apis if conn.is_controller_listener else self._apis
        api = apis.get(header.api_key)
        if api is None:
            raise InvalidRequest(f"unknown API key {header.api_key} on listener {conn.listener}")
        if not api.supports(header.api_version):
            return self._unsupported_version(api, header, apis)
        schema = codec.api_schema(header.api_key, header.api_version)
        try:
            request = self._decode(api, schema, frame, header)
        except codec.MalformedBody as exc:
            return _malformed_body_response(schema, header, exc)
        quota = self._request_quota(header, conn)
        counters = self._counters
        started_ms = 0.0
        if counters is not None:
            started_ms = self._services.clock.monotonic_ms()
        deferred = False  # a response finished later counts its time when it is finished
        context = RequestContext(header, schema, self._services, conn.peer, conn.is_controller_listener,
                                 conn.listener, conn.principal, conn.client_host, conn.security_protocol, quota,
                                 sasl, self._authorizer, self._from_node(conn), getattr(conn, "sends_files", False))
        if counters is not None:
            counters.request_started()  # answered (and counted down) in _count, whichever way it ends
        try:
            for request_filter in self._filters:
                await request_filter.check(context, request)
            if quota.limits(REQUEST_PERCENTAGE):
                response = await self._timed(api, context, request, quota)
            else:
                response = await api.handle(context, request)
            if counters is not None and quota is not NO_QUOTA:
                counters.quota_checked(_QUOTA_RESOURCES.get(api.name, "Request"), conn.principal.name,
                                       header.client_id or "", quota.throttle_ms, started_ms)
            if quota.throttle_ms > 0:
                if isinstance(conn, Mutable):
                    conn.mute_for(quota.throttle_ms)
                response = _with_throttle(response, quota.throttle_ms)
            if response is None:
                return None
            if isinstance(response, codec.DeferredBody):
                deferred = True
                finishing = asyncio.ensure_future(self._finish(api, schema, header, response))
                # Counted when done, however it ends: even cancelled before it ran (its finally would not run).
                finishing.add_done_callback(lambda _: self._count(api, header, started_ms))
                return codec.PendingResponse(finishing)
            return codec.encode_response(schema, header.correlation_id, response)
        except KafkaError as exc:
            return _unanswered_error_response(api, schema, header, exc)
        except Exception as exc:
            # Should it be a handler bug, the connection's log line then says which request it was.
            exc.add_note(f"while serving {api.name} v{header.api_version}: {request!r:.2000}")
            raise
        finally:
            if not deferred:
                self._count(api, header, started_ms)

    def _count(self, api: Api, header: codec.RequestHeader, started_ms: float) -> None:
        if self._counters is not None:
            self._counters.request_served(api.name, header.api_version,
                                          self._services.clock.monotonic_ms() - started_ms)

    async def _finish(self, api: Api, schema: codec.ApiSchema, header: codec.RequestHeader,
                      deferred: codec.DeferredBody) -> Response:
        """The encoded response of a handler that finished it later."""
        try:
            return codec.encode_response(schema, header.correlation_id, await deferred.body)
        except KafkaError as exc:
            return _unanswered_error_response(api, schema, header, exc)

    def _from_node(self, conn: ConnectionInfo) -> bool:
        """Is this a request from another node: on a controller listener, from a principal that may CLUSTER_ACTION
        the cluster (every one, without an authorizer)? Admin clients may use controller listeners too (KIP-919)."""
        if not conn.is_controller_listener:
            return False
        authorizer = self._authorizer
        return authorizer is None or authorizer.authorize(
            self._services.image.acls, str(conn.principal), conn.client_host, AclOperation.CLUSTER_ACTION,
            ResourceType.CLUSTER, CLUSTER_NAME)

    async def _timed(self, api: Api, context: RequestContext, request: Any, quota: RequestQuota) -> Any:
        """Run the handler and count the time it ran (not waited) against the client's request_percentage."""
        clock = self._services.clock
        timed = TimedCoroutine(api.handle(context, request), clock.monotonic_ms)
        try:
            return await timed
        finally:
            quota.record(REQUEST_PERCENTAGE, timed.elapsed_ms, clock.monotonic_ms())

    def _request_quota(self, header: codec.RequestHeader, conn: ConnectionInfo) -> RequestQuota:
        """The request's quota recorder; NO_QUOTA without client quotas, and for other nodes' requests."""
        quotas = self._quotas
        if quotas is None or conn.is_controller_listener:
            return NO_QUOTA
        quotas.update(self._services.image.client_quotas)
        if not quotas.enabled:
            return NO_QUOTA
        return RequestQuota(quotas, conn.principal.name, header.client_id or "",
                            self._services.clock.monotonic_ms())

    @staticmethod
    def _unsupported_version(api: Api, header: codec.RequestHeader, apis: Mapping[int, Api]) -> Response:
        if header.api_key == API_VERSIONS_KEY:
            # Answered in v0, which every client can read, with the ranges this listener serves.
            schema = codec.api_schema(API_VERSIONS_KEY, 0)
            return codec.encode_response(schema, header.correlation_id, unsupported_version_response(apis))
        raise InvalidRequest(f"{api.name} v{header.api_version} is not supported "
                             f"(supported: v{api.min_version}-v{api.max_version})")

    @staticmethod
    def _decode(api: Api, schema: codec.ApiSchema, frame: Frame, header: codec.RequestHeader) -> Any:
        if api.decode is not None:
            return api.decode(frame, codec.body_start(schema, frame, header), header.api_version)
        return codec.decode_request(schema, frame, header)


# The quota sensors' `type` in Kafka: the byte-rate ones of Produce and Fetch, request time for the others.
_QUOTA_RESOURCES = {"Produce": "Produce", "Fetch": "Fetch"}


def _with_throttle(response: Any, throttle_ms: int) -> Any:
    """The response with its throttle_time_ms set, where the handler left it to kio to encode (Produce and Fetch
    encode theirs themselves, with the throttle time their bytes earned)."""
    if isinstance(response, codec.DirectBody):
        response.throttle_time_ms = max(response.throttle_time_ms, throttle_ms)
        return response
    if (dataclasses.is_dataclass(response) and not isinstance(response, type)
            and "throttle_time" in {f.name for f in dataclasses.fields(response)}):
        current = ms_from_timedelta(getattr(response, "throttle_time"))  # noqa: B009 - mypy cannot see it
        if throttle_ms > current:
            return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
    return response


def _unanswered_error_response(api: Api, schema: codec.ApiSchema, header: codec.RequestHeader,
                               exc: KafkaError) -> Response:
    """A Kafka error left unanswered goes in the top-level error code, where the response has one; otherwise the
    connection closes, as for any request that cannot be answered."""
    answer = error_response(schema.response_type, exc.code)
    if answer is None:
        raise InvalidRequest(f"{api.name} v{header.api_version}: {exc.message}") from exc
    return codec.encode_response(schema, header.correlation_id, answer)


def _malformed_body_response(schema: codec.ApiSchema, header: codec.RequestHeader,
                             exc: codec.MalformedBody) -> Response:
    """INVALID_REQUEST where the response has a top-level error code; otherwise the connection closes."""
    response = error_response(schema.response_type, ErrorCode.invalid_request)
    if response is None:
        raise exc
    log.info("answering INVALID_REQUEST to correlation id %d: %s", header.correlation_id, exc)
    return codec.encode_response(schema, header.correlation_id, response)
