"""Dispatch in process: request bytes in, response bytes out, with fakes for the node's services.

No socket and no file: the dispatcher is given a frame as a connection would hand it over, and the handlers
read only what the fake services provide (a metadata image built by hand, a config, a clock).
"""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
import uuid
from dataclasses import dataclass, field, replace
from types import MappingProxyType, SimpleNamespace
from typing import Any

import kio.schema.api_versions.v0.response as av0_resp
import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest as FindCoordinatorRequest_v4
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse, MetadataResponsePartition
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i32Timedelta

from moldau.clock import ManualClock
from moldau.config import BrokerConfig
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import Endpoint, RegisterBrokerRecord
from moldau.protocol import codec
from moldau.protocol.codec import InvalidRequest, PendingResponse
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.wire import ResponsePart
from moldau.security.principal import ANONYMOUS, KafkaPrincipal
from moldau.server.context import RequestContext
from moldau.server.dispatch import Dispatcher
from moldau.server.handlers import api_versions, find_coordinator, metadata
from moldau.server.handlers.api import Api
from moldau.server.handlers.registry import APIS
from moldau.telemetry.clients import ClientTelemetry
from tests.support.wire import in_memory
from tests.unit.metadata.builders import build, partition, registration


@dataclass
class FakeConnection:
    peer: str = "127.0.0.1:50000"
    listener: str = "PLAINTEXT"
    is_controller_listener: bool = False
    principal: KafkaPrincipal = ANONYMOUS
    client_host: str = "127.0.0.1"
    security_protocol: str = "PLAINTEXT"


@dataclass
class FakeServices:
    """Only what the handlers under test read; anything else fails loudly (AttributeError)."""

    image: MetadataImage
    node_id: int = 1
    cluster_id: str = "test-cluster"
    config: BrokerConfig = field(default_factory=lambda: BrokerConfig.from_properties({}))
    clock: ManualClock = field(default_factory=ManualClock)
    closing: bool = False
    created: list[str] = field(default_factory=list)
    client_telemetry: ClientTelemetry = field(
        default_factory=lambda: ClientTelemetry(ManualClock(), lambda: 1 << 20))  # ApiVersions v3+ notes the software
    config_turned_off_apis: dict[int, str] = field(default_factory=dict)  # ApiVersions leaves them out

    def endpoint_for(self, registration: RegisterBrokerRecord, listener: str = "") -> Endpoint | None:
        return next((e for e in registration.endpoints if e.listener == listener), None)

    async def ensure_offsets_topic(self, timeout_s: float = 10.0) -> None:
        self.created.append("__consumer_offsets")

    async def auto_create_topic(self, name: str) -> None:
        self.created.append(name)
        raise KafkaError(ErrorCode.leader_not_available, "the fake cannot create topics")


def encode(request: Any, correlation_id: int = 7) -> bytes:
    """A request frame (without its size prefix), as a connection hands it to the dispatcher."""
    header = struct.pack(">hhih", request.__api_key__, request.__version__, correlation_id, 4) + b"test"
    if request.__flexible__:
        header += b"\x00"
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    return header + body.getvalue()


def decode(pieces: list[ResponsePart] | PendingResponse | None, api_key: int, version: int,
           correlation_id: int = 7) -> Any:
    assert isinstance(pieces, list), pieces
    data = in_memory(pieces)
    assert struct.unpack_from(">i", data)[0] == correlation_id
    schema = codec.api_schema(api_key, version)
    response, _ = entity_reader(schema.response_type)(data[4 + (1 if schema.flexible_response_header else 0):], 0)
    return response


def dispatch(dispatcher: Dispatcher, frame: bytes, conn: FakeConnection | None = None) -> Any:
    return asyncio.run(dispatcher.handle_frame(frame, conn or FakeConnection()))


def two_broker_image() -> MetadataImage:
    return build([registration(1), registration(2, fenced=True)], [partition(0, [1, 2]), partition(1, [2], isr=[2])])


def dispatcher_with(services: FakeServices, **kwargs: Any) -> Dispatcher:
    return Dispatcher(services, **kwargs)  # type: ignore[arg-type]  # a fake of just what is read


def test_metadata_answers_from_the_image_alone() -> None:
    services = FakeServices(two_broker_image())
    request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName("t")),),
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    response = decode(dispatch(dispatcher_with(services), encode(request)), 3, 12)
    assert isinstance(response, MetadataResponse)
    assert response.cluster_id == "test-cluster"
    assert [(b.node_id, b.host) for b in response.brokers] == [(1, "host1")]  # the fenced broker is not listed
    (topic,) = response.topics
    assert topic.name == "t" and topic.error_code == ErrorCode.none
    by_index: dict[int, MetadataResponsePartition] = {p.partition_index: p for p in topic.partitions}
    assert by_index[0].leader_id == 1 and by_index[0].offline_replicas == (2,)
    assert by_index[1].leader_id == 2 and by_index[1].error_code == ErrorCode.none


def test_metadata_of_all_topics_follows_each_new_image_and_broker_change() -> None:
    services = FakeServices(two_broker_image())
    dispatcher = dispatcher_with(services)
    request = encode(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False))

    def partitions() -> dict[int, tuple[int, tuple[int, ...]]]:
        (topic,) = decode(dispatch(dispatcher, request), 3, 12).topics
        return {p.partition_index: (p.leader_id, p.offline_replicas) for p in topic.partitions}

    assert partitions() == partitions() == {0: (1, (2,)), 1: (2, (2,))}  # the second answer reuses the first's
    # Broker 2 unfenced, the topic's image the same object: its replicas are online now.
    unfenced = dict(services.image.brokers)
    unfenced[2] = replace(unfenced[2], fenced=False)
    services.image = replace(services.image, brokers=MappingProxyType(unfenced))
    assert partitions() == {0: (1, ()), 1: (2, ())}
    # A new image of the topic (another leader), the brokers the same object.
    services.image = build([registration(1), registration(2)], [partition(0, [1, 2], leader=2), partition(1, [2])])
    assert partitions()[0] == (2, ())


def test_metadata_auto_creation_goes_to_the_services_and_its_error_is_answered_per_topic() -> None:
    services = FakeServices(two_broker_image())
    request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName("new")),),
                              allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    response = decode(dispatch(dispatcher_with(services), encode(request)), 3, 12)
    assert services.created == ["new"]
    assert [(t.name, t.error_code) for t in response.topics] == [("new", ErrorCode.leader_not_available)]


def test_an_unknown_api_key_closes_the_connection() -> None:
    frame = struct.pack(">hhih", 999, 0, 7, -1)
    with pytest.raises(InvalidRequest, match="unknown API key 999"):
        dispatch(dispatcher_with(FakeServices(MetadataImage())), frame)


def test_a_controller_only_api_on_a_client_listener_closes_the_connection() -> None:
    frame = struct.pack(">hhih", 52, 0, 7, -1)  # Vote
    with pytest.raises(InvalidRequest, match="unknown API key 52 on listener PLAINTEXT"):
        dispatch(dispatcher_with(FakeServices(MetadataImage())), frame)


def test_an_unsupported_api_versions_version_is_answered_in_v0_with_the_ranges_served() -> None:
    frame = struct.pack(">hhih", 18, 99, 7, -1)
    response = decode(dispatch(dispatcher_with(FakeServices(MetadataImage())), frame), 18, 0)
    assert isinstance(response, av0_resp.ApiVersionsResponse)
    assert response.error_code == ErrorCode.unsupported_version
    served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert served == {key: (api.min_version, api.max_version) for key, api in APIS.items()}


def test_an_unsupported_version_of_another_api_closes_the_connection() -> None:
    frame = struct.pack(">hhih", 3, 99, 7, -1)
    with pytest.raises(InvalidRequest, match="Metadata v99 is not supported"):
        dispatch(dispatcher_with(FakeServices(MetadataImage())), frame)


def test_a_malformed_body_is_answered_with_invalid_request_where_the_response_can_say_so() -> None:
    # FindCoordinator v3: the key is a compact string declaring 2**31 bytes.
    frame = struct.pack(">hhih", 10, 3, 7, 1) + b"c" + b"\x00" + b"\x81\x80\x80\x80\x08kkkk\x00\x00"
    response = decode(dispatch(dispatcher_with(FakeServices(MetadataImage())), frame), 10, 3)
    assert response.error_code == ErrorCode.invalid_request


def test_a_malformed_body_without_a_top_level_error_code_closes_the_connection() -> None:
    frame = bytes.fromhex("0014000600007f47000466757a7a0099a2c2d45f98")  # DeleteTopics v6, lying about sizes
    with pytest.raises(codec.MalformedBody):
        dispatch(dispatcher_with(FakeServices(MetadataImage())), frame)


def failing_api(key: int, name: str, error: Exception) -> Api:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        raise error
    return Api(key=key, name=name, min_version=0, max_version=6, handle=handle)


def test_an_unanswered_kafka_error_becomes_the_top_level_error_code() -> None:
    apis = {10: failing_api(10, "FindCoordinator", KafkaError(ErrorCode.coordinator_not_available, "not yet"))}
    request = FindCoordinatorRequest(key="g", key_type=i8(0))
    response = decode(dispatch(dispatcher_with(FakeServices(MetadataImage()), apis=apis), encode(request)), 10, 3)
    assert response.error_code == ErrorCode.coordinator_not_available


def test_an_unanswered_kafka_error_without_a_top_level_error_code_closes_the_connection() -> None:
    apis = {20: failing_api(20, "DeleteTopics", KafkaError(ErrorCode.not_controller, "elsewhere"))}
    request = DeleteTopicsRequest(topics=(DeleteTopicState(name=TopicName("t"), topic_id=uuid.UUID(int=0)),),
                                  timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)))
    with pytest.raises(InvalidRequest, match="DeleteTopics v6: elsewhere"):
        dispatch(dispatcher_with(FakeServices(MetadataImage()), apis=apis), encode(request))


def test_a_handler_bug_propagates_with_a_note_naming_the_request() -> None:
    apis = {10: failing_api(10, "FindCoordinator", ZeroDivisionError("bug"))}
    with pytest.raises(ZeroDivisionError) as caught:
        dispatch(dispatcher_with(FakeServices(MetadataImage()), apis=apis), encode(FindCoordinatorRequest(key="g")))
    assert any("while serving FindCoordinator v3" in note for note in caught.value.__notes__)


@dataclass
class RefuseGroups:
    """A request filter, as authorization will be: it sees the context and the decoded request."""

    seen: list[tuple[str, str, str]] = field(default_factory=list)

    async def check(self, ctx: RequestContext, request: Any) -> None:
        self.seen.append((str(ctx.principal), ctx.client_host, type(request).__name__))
        if isinstance(request, FindCoordinatorRequest):
            raise KafkaError(ErrorCode.group_authorization_failed, "not for you")


def test_request_filters_see_every_request_and_can_refuse_it() -> None:
    refuse = RefuseGroups()
    dispatcher = dispatcher_with(FakeServices(two_broker_image()), filters=[refuse])
    alice = FakeConnection(principal=KafkaPrincipal.parse("User:alice"), client_host="10.0.0.7")
    refused = decode(dispatch(dispatcher, encode(FindCoordinatorRequest(key="g")), alice), 10, 3)
    assert refused.error_code == ErrorCode.group_authorization_failed
    api_versions_request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    served = decode(dispatch(dispatcher, encode(api_versions_request)), 18, 3)
    assert served.error_code == ErrorCode.none
    assert refuse.seen == [("User:alice", "10.0.0.7", "FindCoordinatorRequest"),
                           ("User:ANONYMOUS", "127.0.0.1", "ApiVersionsRequest")]


@dataclass
class FakeGroupCoordinator:
    """Places groups as the real one would answer for them: a node, or an error for a key not placeable yet."""

    nodes: dict[str, int]

    def coordinator_node(self, key: str) -> int:
        if key not in self.nodes:
            raise KafkaError(ErrorCode.coordinator_not_available, f"no partition led for {key}")
        return self.nodes[key]


def test_find_coordinator_answers_each_key_from_the_coordinator_and_the_image() -> None:
    services = FakeServices(build([registration(1), registration(2)]))
    services.groups = SimpleNamespace(coordinator=FakeGroupCoordinator({"a": 1, "b": 2}))  # type: ignore[attr-defined]
    request = FindCoordinatorRequest_v4(key_type=i8(0), coordinator_keys=("a", "b", "c"))
    response = decode(dispatch(dispatcher_with(services), encode(request)), 10, 4)
    assert services.created == ["__consumer_offsets"]
    answers = {c.key: (c.error_code, c.node_id, c.host) for c in response.coordinators}
    assert answers == {
        "a": (ErrorCode.none, 1, "host1"),
        "b": (ErrorCode.none, 2, "host2"),
        "c": (ErrorCode.coordinator_not_available, -1, ""),
    }


def test_handlers_are_registered_by_module() -> None:
    assert APIS[3] is metadata.API and APIS[10] is find_coordinator.API and APIS[18] is api_versions.API
