"""The controller mutation quota in process, through the real dispatcher and DeleteTopics handler: authorization
is decided before the quota, a topic over the quota is refused without reaching the controller, and the
response carries the throttle time (the fake services have no controller: reaching it would fail loudly)."""

from __future__ import annotations

import datetime
import uuid

from kio.schema.delete_topics.v4.request import DeleteTopicsRequest as DeleteTopicsRequestV4
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.types import TopicName
from kio.static.primitive import i32Timedelta

from moldau.metadata.image import acl_record
from moldau.metadata.records import ClientQuotaRecord, MetadataRecord
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.authorizer import Authorizer
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.security.acl.rules import RequestAuthorization
from moldau.security.mutation_quota import MutationQuotaConfig
from moldau.security.quotas import CONTROLLER_MUTATION_RATE, ClientQuotas, entity_key
from moldau.server.dispatch import Dispatcher
from tests.unit.metadata.builders import build, partition, registration
from tests.unit.server.test_authorization import ALICE, AUTHORIZED_CONFIG, BOB, acl
from tests.unit.server.test_dispatch import FakeServices, decode, dispatch, encode


def _dispatcher() -> tuple[Dispatcher, ClientQuotas, FakeServices]:
    """Alice may delete topic `t` (one partition), Bob may not; both users have a quota of 1 partition a second
    in a bucket of 10."""
    image = build([registration(1)], [partition(0, [1])])
    records: list[MetadataRecord] = [
        acl_record(uuid.uuid4(), acl("User:alice", AclOperation.DELETE, ResourceType.TOPIC, "t")),
        ClientQuotaRecord(entity_key("alice"), CONTROLLER_MUTATION_RATE, 1.0),
        ClientQuotaRecord(entity_key("bob"), CONTROLLER_MUTATION_RATE, 1.0)]
    services = FakeServices(image.apply(records, image.offset + 1), config=AUTHORIZED_CONFIG)
    quotas = ClientQuotas(mutation_config=MutationQuotaConfig(window_num=10, window_size_ms=1000))
    quotas.update(services.image.client_quotas)
    dispatcher = Dispatcher(services, filters=[RequestAuthorization()],  # type: ignore[arg-type]
                            authorizer=Authorizer.from_config(AUTHORIZED_CONFIG), quotas=quotas)
    return dispatcher, quotas, services


def _drain(quotas: ClientQuotas, user: str, now_ms: float) -> None:
    """Leave the user's bucket 5 tokens short."""
    quota = quotas.mutation_quota(user, "test", strict=False, now_ms=now_ms)
    assert quota is not None
    quota.admit(15, now_ms)


def test_a_topic_over_the_quota_is_refused_with_the_time_to_wait_and_authorization_comes_first() -> None:
    dispatcher, quotas, services = _dispatcher()
    now = services.clock.monotonic_ms()
    _drain(quotas, "alice", now)
    _drain(quotas, "bob", now)
    request = DeleteTopicsRequest(topics=(DeleteTopicState(name=TopicName("t"), topic_id=uuid.UUID(int=0)),),
                                  timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)))
    refused = decode(dispatch(dispatcher, encode(request), ALICE), 20, 6)
    (result,) = refused.responses
    assert result.error_code == ErrorCode.throttling_quota_exceeded and "retry in 5000 ms" in result.error_message
    assert refused.throttle_time == datetime.timedelta(seconds=5)
    unauthorized = decode(dispatch(dispatcher, encode(request), BOB), 20, 6)
    assert [r.error_code for r in unauthorized.responses] == [ErrorCode.topic_authorization_failed]
    assert unauthorized.throttle_time == datetime.timedelta(0)  # nothing was refused for the quota


def test_before_v5_the_quota_only_throttles() -> None:
    dispatcher, quotas, services = _dispatcher()
    _drain(quotas, "bob", services.clock.monotonic_ms())
    # Bob may not delete `t`: the refused topic takes nothing, so the response is not throttled either.
    request = DeleteTopicsRequestV4(topic_names=(TopicName("t"),),
                                    timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)))
    response = decode(dispatch(dispatcher, encode(request), BOB), 20, 4)
    assert [r.error_code for r in response.responses] == [ErrorCode.topic_authorization_failed]
    assert response.throttle_time == datetime.timedelta(0)
