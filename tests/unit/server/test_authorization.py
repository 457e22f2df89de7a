"""Authorization in process: requests from principals other than ANONYMOUS, through the real dispatcher and
handlers, with ACLs in a metadata image built by hand; and the rule table checked against the registry."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any

import pytest
from kio.schema.add_raft_voter.v1.request import AddRaftVoterRequest
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.join_group.v9.request import JoinGroupRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.remove_raft_voter.v0.request import RemoveRaftVoterRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta

from moldau.config import BrokerConfig
from moldau.metadata.image import MetadataImage, acl_record
from moldau.protocol import codec
from moldau.protocol.error_response import has_top_level_error_code
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.authorizer import Authorizer
from moldau.security.acl.model import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from moldau.security.acl.rules import RULES, RequestAuthorization, Where
from moldau.security.principal import KafkaPrincipal
from moldau.server.context import RequestContext
from moldau.server.dispatch import Dispatcher
from moldau.server.handlers.registry import APIS, CONTROLLER_APIS
from tests.unit.metadata.builders import build, partition, registration
from tests.unit.server.test_dispatch import FakeConnection, FakeServices, decode, dispatch, encode

Op, Res = AclOperation, ResourceType
ALICE = FakeConnection(principal=KafkaPrincipal.parse("User:alice"), client_host="10.0.0.1")
BOB = FakeConnection(principal=KafkaPrincipal.parse("User:bob"), client_host="10.0.0.2")
ADMIN = FakeConnection(principal=KafkaPrincipal.parse("User:admin"))
AUTHORIZED_CONFIG = BrokerConfig.from_properties({
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin;User:broker",
})


def acl(principal: str, op: AclOperation, rtype: ResourceType, name: str,
        perm: AclPermissionType = AclPermissionType.ALLOW, pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def secured(*acls: AclBinding, services: FakeServices | None = None) -> Dispatcher:
    """A dispatcher as the broker builds it when `authorizer.class.name` is set, over an image with topic `t`."""
    image: MetadataImage = build([registration(1)], [partition(0, [1])])
    image = image.apply([acl_record(uuid.uuid4(), a) for a in acls], image.offset + 1)
    if services is None:
        services = FakeServices(image, config=AUTHORIZED_CONFIG)
    else:
        services.image, services.config = image, AUTHORIZED_CONFIG
    authorizer = Authorizer.from_config(AUTHORIZED_CONFIG)
    assert authorizer is not None and authorizer.super_users == {"User:admin", "User:broker"}
    return Dispatcher(services, filters=[RequestAuthorization()], authorizer=authorizer)  # type: ignore[arg-type]


def metadata(dispatcher: Dispatcher, conn: FakeConnection, names: list[str] | None) -> Any:
    topics = None if names is None else tuple(MetadataRequestTopic(topic_id=None, name=TopicName(n)) for n in names)
    request = MetadataRequest(topics=topics, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=True)
    return decode(dispatch(dispatcher, encode(request), conn), 3, 12)


def test_every_api_has_an_authorization_rule() -> None:
    served = set(APIS) | set(CONTROLLER_APIS)
    assert served - set(RULES) == set(), "APIs without a declared authorization rule"
    assert set(RULES) - served == set(), "rules for APIs that are not served"


def test_whole_request_refusals_have_a_top_level_error_code_to_carry_them() -> None:
    for key, rules in RULES.items():
        if any(rule.where is Where.FILTER for rule in rules):
            api = APIS.get(key) or CONTROLLER_APIS[key]
            for version in range(api.min_version, api.max_version + 1):
                assert has_top_level_error_code(codec.api_schema(key, version).response_type), (api.name, version)


def test_metadata_hides_what_the_principal_may_not_describe() -> None:
    dispatcher = secured(acl("User:alice", Op.READ, Res.TOPIC, "t"))
    listed = metadata(dispatcher, ALICE, None)
    assert [t.name for t in listed.topics] == ["t"]
    bits = listed.topics[0].topic_authorized_operations
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert metadata(dispatcher, BOB, None).topics == ()
    (asked,) = metadata(dispatcher, BOB, ["t"]).topics
    assert (asked.name, asked.error_code, asked.partitions) == ("t", ErrorCode.topic_authorization_failed, ())
    (admin_view,) = metadata(dispatcher, ADMIN, None).topics
    assert admin_view.name == "t" and admin_view.error_code == ErrorCode.none


def test_a_deny_for_everyone_beats_a_users_allow() -> None:
    dispatcher = secured(acl("User:alice", Op.DESCRIBE, Res.TOPIC, "t"),
                         acl("User:*", Op.DESCRIBE, Res.TOPIC, "t", AclPermissionType.DENY))
    assert metadata(dispatcher, ALICE, None).topics == ()


def join(dispatcher: Dispatcher, conn: FakeConnection, group: str) -> Any:
    request = JoinGroupRequest(group_id=GroupId(group),
                               session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
                               rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)), member_id="",
                               group_instance_id=None, protocol_type="consumer", protocols=())
    return decode(dispatch(dispatcher, encode(request), conn), 11, 9)


def test_join_group_needs_read_on_the_group() -> None:
    # The fake has no group coordinator: a refused request never reaches the handler.
    dispatcher = secured(acl("User:alice", Op.READ, Res.GROUP, "team-", pattern=PatternType.PREFIXED))
    assert join(dispatcher, BOB, "team-a").error_code == ErrorCode.group_authorization_failed
    assert join(dispatcher, ALICE, "other").error_code == ErrorCode.group_authorization_failed


def test_acl_admin_needs_alter_or_describe_on_the_cluster() -> None:
    dispatcher = secured(acl("User:alice", Op.DESCRIBE, Res.CLUSTER, "kafka-cluster"))
    creation = AclCreation(resource_type=i8(2), resource_name="t", resource_pattern_type=i8(3), principal="User:bob",
                           host="*", operation=i8(int(Op.READ)), permission_type=i8(int(AclPermissionType.ALLOW)))
    created = decode(dispatch(dispatcher, encode(CreateAclsRequest(creations=(creation,))), ALICE), 30, 3)
    assert [r.error_code for r in created.results] == [ErrorCode.cluster_authorization_failed]
    describe = DescribeAclsRequest(resource_type_filter=i8(1), resource_name_filter=None, pattern_type_filter=i8(1),
                                   principal_filter=None, host_filter=None, operation=i8(1), permission_type=i8(1))
    described = decode(dispatch(dispatcher, encode(describe), ALICE), 29, 3)
    assert described.error_code == ErrorCode.none
    assert [(r.resource_type, r.resource_name, [a.principal for a in r.acls]) for r in described.resources] == [
        (4, "kafka-cluster", ["User:alice"])]
    refused = decode(dispatch(dispatcher, encode(describe), BOB), 29, 3)
    assert refused.error_code == ErrorCode.cluster_authorization_failed and refused.resources == ()


def test_voter_changes_need_alter_on_the_cluster() -> None:
    # The fake has no quorum: a refused request never reaches it.
    dispatcher = secured(acl("User:alice", Op.DESCRIBE, Res.CLUSTER, "kafka-cluster"))
    add = AddRaftVoterRequest(cluster_id=None, timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)),
                              voter_id=i32(4),
                              voter_directory_id=None, listeners=(), ack_when_committed=True)
    remove = RemoveRaftVoterRequest(cluster_id=None, voter_id=i32(3), voter_directory_id=None)
    assert decode(dispatch(dispatcher, encode(add), ALICE), 80, 1).error_code == ErrorCode.cluster_authorization_failed
    assert decode(dispatch(dispatcher, encode(remove), BOB), 81, 0).error_code == ErrorCode.cluster_authorization_failed


def test_delete_topics_needs_delete_on_each_topic() -> None:
    dispatcher = secured(acl("User:alice", Op.READ, Res.TOPIC, "t"))
    request = DeleteTopicsRequest(topics=(DeleteTopicState(name=TopicName("t"), topic_id=uuid.UUID(int=0)),),
                                  timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)))
    response = decode(dispatch(dispatcher, encode(request), ALICE), 20, 6)
    assert [(r.name, r.error_code) for r in response.responses] == [("t", ErrorCode.topic_authorization_failed)]


def test_the_docs_table_is_the_rules_table() -> None:
    from pathlib import Path

    from moldau.security.acl.rules import rules_table

    text = (Path(__file__).resolve().parents[3] / "docs" / "security.md").read_text()
    assert rules_table() in text, "regenerate the table in docs/security.md: python -m moldau.security.acl.rules"


def test_auto_creation_needs_create_on_the_cluster_or_the_topic() -> None:
    services = FakeServices(MetadataImage())
    dispatcher = secured(acl("User:*", Op.DESCRIBE, Res.TOPIC, "*"),
                         acl("User:alice", Op.CREATE, Res.TOPIC, "new-", pattern=PatternType.PREFIXED),
                         services=services)
    request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName("new-a")),),
                              allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    (refused,) = decode(dispatch(dispatcher, encode(request), BOB), 3, 12).topics
    assert refused.error_code == ErrorCode.topic_authorization_failed and services.created == []
    (created,) = decode(dispatch(dispatcher, encode(request), ALICE), 3, 12).topics
    assert services.created == ["new-a"]  # the fake then answers LEADER_NOT_AVAILABLE
    assert created.error_code == ErrorCode.leader_not_available


def on_controller_listener(dispatcher: Dispatcher, conn: FakeConnection, api_key: int, version: int) -> bool:
    """Run the whole-request filter as for a request on a controller listener (the handler is not reached);
    whether the sender counts as another node."""
    listener = FakeConnection(principal=conn.principal, client_host=conn.client_host, listener="CONTROLLER",
                              is_controller_listener=True)
    header = codec.RequestHeader(api_key, version, 7, "node", 0)
    from_node = dispatcher._from_node(listener)
    ctx = RequestContext(header, codec.api_schema(api_key, version), dispatcher._services, listener.peer,
                         True, listener.listener, listener.principal, listener.client_host,
                         authorizer=dispatcher._authorizer, from_node=from_node)
    asyncio.run(RequestAuthorization().check(ctx, object()))
    return from_node


def test_controller_listeners_serve_node_apis_only_to_principals_with_cluster_action() -> None:
    dispatcher = secured(acl("User:alice", Op.CLUSTER_ACTION, Res.CLUSTER, "kafka-cluster"))
    broker = FakeConnection(principal=KafkaPrincipal.parse("User:broker"))  # a super user
    for api_key, version in ((62, 4), (63, 1), (52, 0), (1, 16), (56, 3), (67, 0), (82, 0)):
        assert on_controller_listener(dispatcher, ALICE, api_key, version)  # allowed by her ACL
        assert on_controller_listener(dispatcher, broker, api_key, version)
        with pytest.raises(KafkaError) as refused:
            on_controller_listener(dispatcher, BOB, api_key, version)
        assert refused.value.code == ErrorCode.cluster_authorization_failed
        assert "only other nodes may send" in refused.value.message
    # Admin requests from a client that talks to the controller directly (KIP-919) are its own to authorize.
    assert not on_controller_listener(dispatcher, BOB, 18, 3)
    with pytest.raises(KafkaError) as not_described:
        on_controller_listener(dispatcher, BOB, 55, 2)  # DescribeQuorum: DESCRIBE on the cluster
    assert not_described.value.code == ErrorCode.cluster_authorization_failed
