"""A broker whose console's client listener is SASL_PLAINTEXT with an authorizer, for the console's sign-in, ACL
and quota tests: `admin` (PLAIN) is the super user, `alice` (PLAIN) and `bob` (SCRAM-SHA-512) are ordinary users
whose ACLs the tests set. The console connects to the first listener, so the SASL one comes first; the brokers'
own traffic stays on a PLAINTEXT listener."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moldau.net.ports import free_ports
from tests.support.broker_process import BrokerProcess
from tests.support.sasl import create_scram_users

__all__ = ["PASSWORDS", "SecuredBroker", "http", "start_secured_broker"]

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


@dataclass
class SecuredBroker:
    proc: BrokerProcess
    bootstrap: str  # the SASL_PLAINTEXT listener

    def conf(self, user: str, mechanism: str = "PLAIN") -> dict[str, Any]:
        """confluent-kafka settings acting as `user`."""
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": PASSWORDS[user]}

    def admin_properties(self) -> Path:
        """A client properties file for `moldau ... --command-config`, as the super user."""
        path = self.proc.data_dir / "admin.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                        'username="admin" password="admin-secret";\n')
        return path


def start_secured_broker(data_dir: Path, overrides: dict[str, str] | None = None) -> SecuredBroker:
    sasl, plain = free_ports(2)
    proc = BrokerProcess(data_dir, {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl},PLAINTEXT://127.0.0.1:{plain}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        **(overrides or {}),
    }, port=sasl)
    proc.start()
    broker = SecuredBroker(proc, f"127.0.0.1:{sasl}")
    try:
        create_scram_users(broker.bootstrap, {"SCRAM-SHA-512": ("bob", PASSWORDS["bob"])})
    except BaseException:
        proc.cleanup()
        raise
    return broker


def http(url: str, method: str = "GET", body: dict[str, str] | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    """One request to the console without following redirects: (status, headers in lower case, body)."""
    data = None if body is None else urllib.parse.urlencode(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read().decode()
