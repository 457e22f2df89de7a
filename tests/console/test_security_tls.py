"""The console on a SASL_SSL listener that also requires client certificates: its clients must trust the broker's
certificate (through the broker's own trust store) and present the broker's key store, both for the sign-in check
(Moldau's client) and for the pages (librdkafka). Plain HTTP, no browser: the cookie and redirects are the point."""

from __future__ import annotations

import re
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.net.ports import free_ports
from tests.support.broker_process import BrokerProcess
from tests.support.console_auth import http
from tests.support.sasl_broker import plain_jaas
from tests.support.tls import make_pki


def test_signing_in_and_browsing_over_sasl_ssl_with_client_certificates(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    sasl_ssl, plain = free_ports(2)
    proc = BrokerProcess(tmp_path / "broker", {
        "listeners": f"SASL_SSL://127.0.0.1:{sasl_ssl},PLAINTEXT://127.0.0.1:{plain}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(),
        **pki.broker_config(client_auth="required"),
    }, port=sasl_ssl)
    (tmp_path / "broker").mkdir()
    proc.start()
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
        admin.create_topics([NewTopic("tls-console-topic", 2, 1)])["tls-console-topic"].result(30)
        base = proc.console_url

        status, headers, _ = http(base + "/login", "POST", {"username": "admin", "password": "admin-secret",
                                                            "mechanism": "PLAIN", "next": "/"})
        assert status == 303 and headers["location"] == "/", headers
        cookie = headers["set-cookie"]
        assert re.match(r"moldau_session=[\w-]{40,};", cookie), cookie
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie  # http console
        session = cookie.split(";")[0]

        status, _, page = http(base + "/", headers={"Cookie": session, "Accept": "text/html"})
        assert status == 200
        count = re.search(r'id="partition-count">(\d+)<', page)
        assert count and int(count[1]) >= 2, page[-2000:]

        status, _, _ = http(base + "/logout", "POST", {}, {"Cookie": session})
        assert status == 303
        status, headers, _ = http(base + "/", headers={"Cookie": session, "Accept": "text/html"})
        assert status == 303 and headers["location"] == "/login?next=%2F"
    finally:
        try:
            assert proc.stop() == 0, proc.log_tail()
        finally:
            proc.cleanup()
