"""SASL in a cluster: SCRAM users live in the metadata log (one created through any broker authenticates on every
broker); brokers replicate over a SASL inter-broker listener; nodes authenticate on a SASL controller listener."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

from kio.schema.broker_heartbeat.v1.request import BrokerHeartbeatRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.types import BrokerId
from kio.static.primitive import i64

from moldau.net.ports import free_ports
from moldau.protocol.errors import ErrorCode
from tests.support.cluster import LocalCluster
from tests.support.delegation_tokens import (
    create_token,
    describe_tokens,
    plain_properties,
    token_cli,
    token_logs_in,
)
from tests.support.oauth import identity_provider
from tests.support.polling import wait_until
from tests.support.raw_client import RawClient
from tests.support.sasl import JAAS, can_authenticate, create_scram_users, handshake


def sasl_cluster(tmp_path: Path, inter_broker: str, settings: dict[str, str]) -> tuple[LocalCluster, dict[int, str]]:
    """Three combined nodes, each with a SASL_PLAINTEXT listener next to the generated PLAINTEXT and CONTROLLER
    ones, `inter_broker` ("PLAINTEXT" or "SASL_PLAINTEXT") between brokers, and `settings`; with each node's SASL
    address."""
    ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    cluster = LocalCluster(tmp_path, nodes=3)
    sasl = {}
    for node_id, node in cluster.nodes.items():
        plain = f"PLAINTEXT://{node.spec.kafka_address}"
        sasl[node_id] = f"127.0.0.1:{ports[node_id]}"
        node.overrides.update({
            "listeners": f"{plain},SASL_PLAINTEXT://{sasl[node_id]},CONTROLLER://{node.spec.controller_address}",
            "advertised.listeners": f"{plain},SASL_PLAINTEXT://{sasl[node_id]}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": inter_broker,
            **settings,
        })
    return cluster, sasl


def test_scram_user_created_on_one_broker_authenticates_on_the_others(tmp_path: Path) -> None:
    cluster, sasl = sasl_cluster(tmp_path, "PLAINTEXT", {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    })
    with cluster:
        cluster.active_controller(timeout_s=30)
        create_scram_users(sasl[1], {"SCRAM-SHA-512": ("frank", "frank-secret")})
        for node_id in (2, 3):
            wait_until(partial(can_authenticate, sasl[node_id], "SCRAM-SHA-512", "frank", "frank-secret"),
                       15, f"frank authenticates on node {node_id}")
        assert not can_authenticate(sasl[3], "SCRAM-SHA-512", "frank", "wrong")


def test_brokers_replicate_over_a_sasl_inter_broker_listener(tmp_path: Path) -> None:
    """Followers fetch from leaders on the SASL_PLAINTEXT listener, authenticated with PLAIN as `admin`."""
    from confluent_kafka import Producer

    # confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    cluster, _ = sasl_cluster(tmp_path, "SASL_PLAINTEXT", {
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    })
    with cluster:
        cluster.active_controller(timeout_s=30)
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic("replicated", 1, 3, config={"min.insync.replicas": "3"})
        admin.create_topics([topic])["replicated"].result(30)

        def full_isr() -> bool:
            partition = admin.list_topics("replicated", timeout=5).topics["replicated"].partitions[0]
            return len(partition.isrs) == 3

        wait_until(full_isr, 30, "all three replicas in the ISR")
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        failures: list[object] = []

        def delivered(err: object, _msg: object) -> None:
            if err is not None:
                failures.append(err)

        for i in range(20):
            producer.produce("replicated", value=str(i).encode(), on_delivery=delivered)
        # acks=all with min.insync.replicas=3: every follower fetched over the SASL listener.
        assert producer.flush(30) == 0 and not failures
        for node in cluster.nodes.values():
            assert "authentication to" not in node.log_tail(400)


CONTROLLER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="node" '
                   'password="node-secret" user_node="node-secret" user_mallory="mallory-secret";')


def test_controllers_and_brokers_authenticate_on_a_sasl_controller_listener(tmp_path: Path) -> None:
    """The controller listener is SASL_PLAINTEXT with PLAIN (`sasl.mechanism.controller.protocol`): the quorum,
    broker registrations, heartbeats and forwarded admin requests all authenticate as `node`, a super user. An
    unauthenticated connection there gets no answer, and another user of the same JAAS config, authenticated, may
    not act as a node."""
    # confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    cluster = LocalCluster(tmp_path, nodes=3)
    for node in cluster.nodes.values():
        node.overrides.update({
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:node;User:ANONYMOUS",  # ANONYMOUS: the PLAINTEXT client listener, for the test
            "allow.everyone.if.no.acl.found": "false",
        })
    with cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 60, "three brokers registered")
        for node in cluster.brokers:  # two of them forward to the active controller
            name = f"via-sasl-controllers-{node.node_id}"
            assert node.kafka_address is not None
            through = AdminClient({"bootstrap.servers": node.kafka_address})
            through.create_topics([NewTopic(name, 3, 3)])[name].result(30)
        controller = next(iter(cluster.nodes.values())).controller_address
        assert controller is not None
        with RawClient(controller) as anonymous:
            anonymous.send_raw(anonymous.encode(BrokerHeartbeatRequest(
                broker_id=BrokerId(9), broker_epoch=i64(1), current_metadata_offset=i64(0), want_fence=False,
                want_shut_down=False,
                offline_log_dirs=())))
            assert anonymous.is_closed_by_peer()  # nothing but SASL before authenticating
        with RawClient(controller) as mallory:
            assert handshake(mallory, "PLAIN").error_code == ErrorCode.none
            assert mallory.request(SaslAuthenticateRequest(auth_bytes=b"\0mallory\0mallory-secret")).error_code == 0
            heartbeat = mallory.request(BrokerHeartbeatRequest(
                broker_id=BrokerId(9), broker_epoch=i64(1), current_metadata_offset=i64(0), want_fence=False,
                want_shut_down=False,
                offline_log_dirs=()))
            assert heartbeat.error_code == ErrorCode.cluster_authorization_failed
        for node in cluster.nodes.values():
            assert "authentication to" not in node.log_tail(400)


SCRAM_BROKER_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
                     'password="broker-secret";')


def test_brokers_seeded_with_add_scram_replicate_over_scram_alone(tmp_path: Path) -> None:
    """No PLAIN anywhere: the inter-broker listener offers SCRAM only, and the brokers' own user exists from the
    start because every node was started with `--add-scram` (Kafka's `kafka-storage format --add-scram`). A seeded
    user deleted later does not come back when a node restarts with the same arguments."""
    from confluent_kafka import Producer

    # confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        NewTopic,
        ScramMechanism,
        UserScramCredentialDeletion,
    )

    cluster, sasl = sasl_cluster(tmp_path, "SASL_PLAINTEXT", {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_BROKER_JAAS,
    })
    for node in cluster.nodes.values():
        node.extra_args = ["--add-scram", "SCRAM-SHA-512=[name=broker,password=broker-secret]",
                           "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret,iterations=8192]"]
    with cluster:
        cluster.active_controller(timeout_s=30)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("seeded", 1, 3, config={"min.insync.replicas": "3"})])["seeded"].result(30)

        def full_isr() -> bool:
            return len(admin.list_topics("seeded", timeout=5).topics["seeded"].partitions[0].isrs) == 3

        wait_until(full_isr, 30, "all three replicas in the ISR, fetching over SCRAM")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(20):
            producer.produce("seeded", value=str(i).encode())
        assert producer.flush(30) == 0
        assert all(can_authenticate(address, "SCRAM-SHA-256", "alice", "alice-secret") for address in sasl.values())
        assert not can_authenticate(sasl[2], "SCRAM-SHA-256", "alice", "wrong")

        deletion = UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)
        for future in admin.alter_user_scram_credentials([deletion]).values():
            future.result(30)
        wait_until(lambda: not can_authenticate(sasl[1], "SCRAM-SHA-256", "alice", "alice-secret"), 15,
                   "alice deleted")
        cluster.node(1).restart()
        wait_until(full_isr, 30, "node 1 back in the ISR over SCRAM")
        assert not can_authenticate(sasl[1], "SCRAM-SHA-256", "alice", "alice-secret")
        assert "writing the SCRAM credentials" not in cluster.node(1).log_tail(400).split("===== start #2")[-1]


def test_brokers_replicate_over_oauthbearer_with_tokens_from_an_identity_provider(tmp_path: Path) -> None:
    """The inter-broker listener takes signed tokens only (JWKS); each broker logs in as `broker` with client
    credentials at the provider. Tokens last 5 s: replication outlives several of them, the brokers fetching new
    ones and re-authenticating before their sessions end (no connection is cut for an expired session)."""
    from confluent_kafka import Producer

    # confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    with identity_provider() as (idp, url):
        idp.clients["broker"] = ("broker-secret", "broker")
        idp.token_lifetime_s = 5
        cluster, _ = sasl_cluster(tmp_path, "SASL_PLAINTEXT", {
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            "sasl.oauthbearer.jwks.endpoint.url": f"{url}/jwks",
            "sasl.oauthbearer.expected.audience": "moldau",
            "sasl.oauthbearer.token.endpoint.url": f"{url}/token",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'clientId="broker" clientSecret="broker-secret";',
        })
        with cluster:
            cluster.active_controller(timeout_s=30)
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            admin.create_topics([NewTopic("oauth-replicated", 1, 3, config={"min.insync.replicas": "3"})])[
                "oauth-replicated"].result(30)

            def full_isr() -> bool:
                partitions = admin.list_topics("oauth-replicated", timeout=5).topics["oauth-replicated"].partitions
                return len(partitions[0].isrs) == 3

            wait_until(full_isr, 30, "all three replicas in the ISR")
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
            failures: list[object] = []
            for round_ in range(3):  # 0 s, 6 s, 12 s: past two token lifetimes
                for i in range(10):
                    producer.produce("oauth-replicated", value=f"{round_}-{i}".encode(),
                                     on_delivery=lambda err, _msg: failures.append(err) if err else None)
                # acks=all with min.insync.replicas=3: every follower fetched over the OAUTHBEARER listener.
                assert producer.flush(30) == 0 and not failures
                if round_ < 2:
                    time.sleep(6)
            assert idp.tokens_issued >= 6  # three brokers, each renewing at least once
            for node in cluster.nodes.values():
                log = node.log_tail(2000)
                assert "authentication to" not in log and "after the SASL session expired" not in log


def refused(bootstrap: str, token: dict[str, str]) -> bool:
    return not token_logs_in(bootstrap, token)


def test_delegation_tokens_made_through_any_broker_work_on_every_broker(tmp_path: Path) -> None:
    """Brokers that are not the active controller forward token requests in an Envelope with the client's
    principal (KIP-48 in a cluster): the token's owner and requester are the client, not the forwarding node, a
    token made through one node logs in on every node, and its owner renews and expires it through another."""
    cluster, sasl = sasl_cluster(tmp_path, "PLAINTEXT", {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "delegation.token.secret.key": "the-cluster-token-secret",
    })
    alice = plain_properties(tmp_path, "alice", "alice-secret")
    with cluster:
        leader = cluster.active_controller(timeout_s=30).leader_id
        tokens = {}
        for node_id in (1, 2, 3):
            token = create_token(sasl[node_id], alice)
            assert (token["owner"], token["requester"]) == ("User:alice", "User:alice"), node_id
            tokens[node_id] = token
        for made_on, token in tokens.items():
            for node_id in (1, 2, 3):
                wait_until(partial(token_logs_in, sasl[node_id], token), 15,
                           f"the token made through node {made_on} logs in on node {node_id}")
        follower = next(n for n in (1, 2, 3) if n != leader)
        renewed = token_cli(sasl[follower], alice, "renew", "--hmac", tokens[leader]["hmac"],
                            "--renew-time-period", "60000")
        assert renewed.returncode == 0, renewed.stderr
        expired = token_cli(sasl[follower], alice, "expire", "--hmac", tokens[leader]["hmac"])
        assert expired.returncode == 0, expired.stderr
        for node_id in (1, 2, 3):
            wait_until(partial(refused, sasl[node_id], tokens[leader]), 15,
                       f"the expired token is refused on node {node_id}")
        assert {t["token_id"] for t in describe_tokens(sasl[follower], alice)} == {
            tokens[n]["token_id"] for n in (1, 2, 3) if n != leader}
