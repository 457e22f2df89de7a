"""AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter (KIP-853) on a real single-node broker: advertised where
Kafka 4.2 advertises them, refused with Kafka's error codes while the quorum is static and for every bad request
once it is dynamic. The multi-node behaviour is in tests/cluster/test_raft_voters_cluster.py."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.add_raft_voter.v1.request import AddRaftVoterRequest, Listener
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.remove_raft_voter.v0.request import RemoveRaftVoterRequest
from kio.static.primitive import i32, i32Timedelta, u16

from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.cli_runner import moldau, ok
from tests.support.raw_client import RawClient


@pytest.fixture(scope="module")
def voter_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("voter-broker"))
    proc.start()
    yield proc
    try:
        assert proc.stop() == 0
    finally:
        proc.cleanup()


def add(voter_id: int, listeners: tuple[Listener, ...] = (), timeout_s: float = 1.0,
        cluster_id: str | None = None) -> AddRaftVoterRequest:
    return AddRaftVoterRequest(cluster_id=cluster_id, timeout=i32Timedelta.parse(datetime.timedelta(seconds=timeout_s)),
                               voter_id=i32(voter_id), voter_directory_id=uuid.uuid4(), listeners=listeners,
                               ack_when_committed=True)


def remove(voter_id: int) -> RemoveRaftVoterRequest:
    return RemoveRaftVoterRequest(cluster_id=None, voter_id=i32(voter_id), voter_directory_id=None)


def code_of(bootstrap: str, request: Any) -> ErrorCode:
    with RawClient(bootstrap, timeout_s=15) as client:
        return ErrorCode(client.request(request).error_code)


CONTROLLER = (Listener(name="CONTROLLER", host="127.0.0.1", port=u16(9999)),)


def test_advertised_on_client_listeners_as_kafka_4_2_does(voter_broker: BrokerProcess) -> None:
    with RawClient(voter_broker.bootstrap) as client:
        response = client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    served = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
    assert served[80] == (0, 1) and served[81] == (0, 0)
    assert 82 not in served  # UpdateRaftVoter is for controller listeners only


def test_voter_changes_follow_kraft_version(voter_broker: BrokerProcess) -> None:
    bootstrap = voter_broker.bootstrap
    # Static (kraft.version 0): UNSUPPORTED_VERSION, as Kafka answers.
    assert code_of(bootstrap, add(2, CONTROLLER)) == ErrorCode.unsupported_version
    assert code_of(bootstrap, remove(1)) == ErrorCode.unsupported_version
    ok(bootstrap, "features", "upgrade", "--feature", "kraft.version=1")
    described = ok(bootstrap, "features", "describe")
    assert any(line.split()[:1] == ["kraft.version"] and line.split()[3] == "1" for line in described.splitlines())
    status = ok(bootstrap, "quorum", "describe", "--status")
    assert '"id": 1' in status and "directoryId" in status  # the VotersRecord holds the node's directory id
    # Dynamic: every bad request gets its own Kafka error.
    assert code_of(bootstrap, add(1, CONTROLLER)) == ErrorCode.duplicate_voter
    assert code_of(bootstrap, remove(9)) == ErrorCode.voter_not_found
    assert code_of(bootstrap, remove(1)) == ErrorCode.invalid_request  # the only voter
    assert code_of(bootstrap, add(2)) == ErrorCode.invalid_request  # no endpoint on the controller listener
    assert code_of(bootstrap, add(2, CONTROLLER, cluster_id="another")) == ErrorCode.inconsistent_cluster_id
    assert code_of(bootstrap, add(2, CONTROLLER, timeout_s=0.5)) == ErrorCode.request_timed_out  # never fetched
    ok(bootstrap, "features", "upgrade", "--feature", "kraft.version=1")  # upgrading again changes nothing
    refused = moldau(bootstrap, "features", "downgrade", "--feature", "kraft.version=0")
    assert refused.returncode != 0 and "INVALID_UPDATE_VERSION" in refused.stderr  # no way back, as in Kafka
