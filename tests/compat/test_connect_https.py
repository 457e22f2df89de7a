"""The Connect REST API over HTTPS, with real worker processes, real sockets and certificates made by the test
(`tests.support.tls`): a standalone worker with an https and an http listener answers over both, refuses plain
HTTP on its https port and clients that do not trust its certificate; with `ssl.client.auth=required` it serves
only clients with a certificate signed by its trusted CA; and two distributed workers advertising https
listeners forward a connector creation from the follower to the leader over HTTPS."""

from __future__ import annotations

import http.client
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from moldau.net.ports import free_port
from tests.support.broker_process import BrokerProcess
from tests.support.connect_worker import WorkerProcess, group_leader, read_lines, until_settled, wait_for
from tests.support.tls import Pki, make_pki

REBALANCE_S = 60.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("connect-pki"))


def _tls_configs(pki: Pki, prefix: str = "", client_auth: str | None = None) -> dict[str, str]:
    configs = {f"{prefix}ssl.keystore.type": "PEM", f"{prefix}ssl.keystore.location": str(pki.server),
               f"{prefix}ssl.truststore.type": "PEM", f"{prefix}ssl.truststore.location": str(pki.ca)}
    if client_auth is not None:
        configs[f"{prefix}ssl.client.auth"] = client_auth
    return configs


def _get(url: str, context: ssl.SSLContext | None) -> int:
    with urllib.request.urlopen(url, timeout=10, context=context) as response:
        return int(response.status)


def _moldau_connect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau", "connect", *args], capture_output=True, text=True,
                          timeout=60, check=False, cwd=Path(__file__).resolve().parents[2])


def _file_source(tmp_path: Path, topic: str) -> dict[str, str]:
    source = tmp_path / "in.txt"
    source.write_text("")
    return {"connector.class": "FileStreamSource", "file": str(source), "topic": topic}


def test_a_standalone_worker_serves_its_api_over_https(shared_broker: BrokerProcess, pki: Pki,
                                                       tmp_path: Path) -> None:
    http_port = free_port()
    worker = WorkerProcess(tmp_path / "worker", shared_broker.bootstrap, scheme="https",
                           client_tls=pki.client_context(), overrides=_tls_configs(pki, "listeners.https."))
    worker.properties["listeners"] += f",http://127.0.0.1:{http_port}"
    worker.start()
    try:
        status, root = worker.request("GET", "/")
        assert status == 200 and set(root) == {"version", "commit", "kafka_cluster_id"}
        name, config = f"https-{uuid.uuid4().hex[:6]}", _file_source(tmp_path, "https-topic")
        assert worker.request("POST", "/connectors", {"name": name, "config": config})[0] == 201
        assert worker.request("GET", "/connectors")[1] == [name]
        assert worker.request("PUT", f"/connectors/{name}/config", {**config, "topic": "other"})[0] == 200
        assert worker.request("GET", f"/connectors/{name}/config")[1]["topic"] == "other"
        assert worker.request("DELETE", f"/connectors/{name}")[0] == 204
        assert worker.request("GET", "/connectors")[1] == []
        # The http listener serves the same API.
        assert _get(f"http://127.0.0.1:{http_port}/connectors", None) == 200
        # Plain HTTP on the https port gets no HTTP answer (the TLS layer drops it).
        connection = http.client.HTTPConnection("127.0.0.1", worker.port, timeout=10)
        with pytest.raises((http.client.HTTPException, OSError)):
            connection.request("GET", "/")
            connection.getresponse()
        connection.close()
        # A client that does not trust the worker's CA refuses the worker's certificate.
        with pytest.raises(urllib.error.URLError) as refused:
            _get(worker.url + "/", ssl.create_default_context())
        assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
        assert worker.stop() == 0, worker.log_tail()
    finally:
        worker.cleanup()


def test_client_certificates_are_required_when_configured(shared_broker: BrokerProcess, pki: Pki,
                                                          tmp_path: Path) -> None:
    with_certificate = pki.client_context()
    with_certificate.load_cert_chain(str(pki.client))
    worker = WorkerProcess(tmp_path / "worker", shared_broker.bootstrap, scheme="https",
                           client_tls=with_certificate, overrides=_tls_configs(pki, client_auth="required"))
    worker.start()
    try:
        assert _get(worker.url + "/", with_certificate) == 200
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            _get(worker.url + "/", pki.client_context())  # trusts the worker, but has no certificate
        other_ca = make_pki(tmp_path / "other-pki")
        stranger = pki.client_context()
        stranger.load_cert_chain(str(other_ca.client))  # a certificate the worker's CA did not sign
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            _get(worker.url + "/", stranger)
        # `moldau connect` with the CA and a client certificate manages such a worker; without one it cannot.
        listed = _moldau_connect("list", "--url", worker.url, "--cacert", str(pki.ca), "--cert", str(pki.client))
        assert listed.returncode == 0, listed.stderr
        refused = _moldau_connect("list", "--url", worker.url, "--cacert", str(pki.ca))
        assert refused.returncode == 1 and "cannot reach the Connect worker" in refused.stderr, refused.stderr
        missing = _moldau_connect("list", "--url", worker.url, "--cert", str(tmp_path / "none.pem"))
        assert missing.returncode == 1 and "cannot use the client certificate" in missing.stderr, missing.stderr
        assert worker.stop() == 0, worker.log_tail()
    finally:
        worker.cleanup()


def test_a_worker_without_its_https_settings_does_not_start(shared_broker: BrokerProcess, tmp_path: Path) -> None:
    worker = WorkerProcess(tmp_path / "worker", shared_broker.bootstrap, scheme="https")
    with pytest.raises(RuntimeError, match=r"ssl\.keystore\.location"):
        worker.start()
    advertised = WorkerProcess(tmp_path / "advertised", shared_broker.bootstrap,
                               overrides={"rest.advertised.listener": "https"})
    with pytest.raises(RuntimeError, match=r"rest\.advertised\.listener"):
        advertised.start()


def distributed_settings(run: str) -> dict[str, str]:
    return {"group.id": f"connect-https-{run}", "config.storage.topic": f"connect-https-configs-{run}",
            "offset.storage.topic": f"connect-https-offsets-{run}",
            "status.storage.topic": f"connect-https-status-{run}", "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1", "status.storage.partitions": "1", "heartbeat.interval.ms": "1000",
            "scheduled.rebalance.max.delay.ms": "3000"}


def test_distributed_workers_forward_to_the_leader_over_https(shared_broker: BrokerProcess, pki: Pki,
                                                              tmp_path: Path) -> None:
    """Both workers listen on https only and require client certificates: the follower's forwarded request
    reaches the leader only because it trusts the leader's certificate and presents its own."""
    run = uuid.uuid4().hex[:8]
    with_certificate = pki.client_context()
    with_certificate.load_cert_chain(str(pki.client))
    settings = {**distributed_settings(run), **_tls_configs(pki, "listeners.https.", client_auth="required"),
                "rest.advertised.listener": "https"}
    workers = [WorkerProcess(tmp_path / f"worker-{i}", shared_broker.bootstrap, settings, mode="distributed",
                             scheme="https", client_tls=with_certificate) for i in range(2)]
    try:
        for worker in workers:
            worker.start(timeout_s=60)
        leader = group_leader(workers)
        follower = next(w for w in workers if w is not leader)
        source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
        source.write_text("")
        topic = f"https-{run}"
        for name, config in [("https-source", {"connector.class": "FileStreamSource", "file": str(source),
                                               "topic": topic}),
                             ("https-sink", {"connector.class": "FileStreamSink", "file": str(sink),
                                             "topics": topic})]:
            status, body = until_settled(follower, "POST", "/connectors", {"name": name, "config": config})
            assert status == 201, body
        source.write_text("over\nhttps\n")
        wait_for(lambda: read_lines(sink) == ["over", "https"], REBALANCE_S, "the lines in the sink file")
        status, body = follower.request("GET", "/connectors/https-source/status")
        assert status == 200 and body["connector"]["state"] == "RUNNING"
        for worker in workers:
            assert worker.stop() == 0, worker.log_tail()
    finally:
        for worker in workers:
            worker.cleanup()


def _status(url: str, context: ssl.SSLContext | None = None) -> int:
    try:
        return _get(url, context)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_admin_listeners_serve_the_admin_endpoints_instead(shared_broker: BrokerProcess, pki: Pki,
                                                           tmp_path: Path) -> None:
    """`admin.listeners` (KIP-495): the /admin endpoints move to its listeners (an https one here, with
    `admin.listeners.https.ssl.*` asking for client certificates) and leave the API's; empty, they are served
    nowhere."""
    admin_port = free_port()
    worker = WorkerProcess(tmp_path / "admin", shared_broker.bootstrap, overrides={
        "admin.listeners": f"https://127.0.0.1:{admin_port}",
        **_tls_configs(pki, "admin.listeners.https.", client_auth="required")})
    worker.start()
    try:
        assert worker.request("GET", "/connectors")[0] == 200  # the API's listener is plain http, as before
        assert worker.request("GET", "/admin/loggers")[0] == 404  # but no longer serves /admin
        admin = f"https://127.0.0.1:{admin_port}"
        with_certificate = pki.client_context()
        with_certificate.load_cert_chain(str(pki.client))
        assert _status(admin + "/admin/loggers", with_certificate) == 200
        assert _status(admin + "/connectors", with_certificate) == 404  # the admin listener has nothing else
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            _get(admin + "/admin/loggers", pki.client_context())  # no client certificate
        assert worker.stop() == 0, worker.log_tail()
    finally:
        worker.cleanup()
    disabled = WorkerProcess(tmp_path / "disabled", shared_broker.bootstrap, overrides={"admin.listeners": ""})
    disabled.start()
    try:
        assert disabled.request("GET", "/connectors")[0] == 200
        assert disabled.request("GET", "/admin/loggers")[0] == 404
        assert disabled.stop() == 0, disabled.log_tail()
    finally:
        disabled.cleanup()
