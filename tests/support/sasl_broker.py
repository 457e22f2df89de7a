"""A broker whose first client listener is SASL_PLAINTEXT, with Kafka's StandardAuthorizer, for the tests of ACLs
and of the console acting as a signed-in user. `admin` (PLAIN) is the super user; the other PLAIN users are named
by the test; every user's password is `<user>-secret`. The SASL listener comes first because the console connects
to the first client listener; the brokers' own traffic stays on a PLAINTEXT listener."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moldau.net.ports import free_ports
from tests.support.broker_process import BrokerProcess

__all__ = ["SaslBroker", "password", "plain_jaas", "start_sasl_broker"]


def password(user: str) -> str:
    return f"{user}-secret"


def plain_jaas(users: Sequence[str] = ()) -> str:
    """The broker's PLAIN login config: the broker itself as `admin`, and `admin` and `users` as its users."""
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            f'password="{password("admin")}" '
            + " ".join(f'user_{user}="{password(user)}"' for user in ("admin", *users)) + ";")


@dataclass
class SaslBroker:
    proc: BrokerProcess
    bootstrap: str  # the SASL_PLAINTEXT listener

    def conf(self, user: str, mechanism: str = "PLAIN") -> dict[str, Any]:
        """confluent-kafka settings acting as `user`."""
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password(user)}

    def admin_properties(self) -> Path:
        """A client properties file for `moldau ... --command-config`, as the super user."""
        path = self.proc.data_dir / "admin.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                        f'username="admin" password="{password("admin")}";\n')
        return path

    def stop(self) -> int:
        """Stop the broker and remove its data; its exit status."""
        try:
            return self.proc.stop()
        finally:
            self.proc.cleanup()


def start_sasl_broker(data_dir: Path, users: Sequence[str] = ("alice",), mechanisms: Sequence[str] = ("PLAIN",),
                      overrides: dict[str, str] | None = None) -> SaslBroker:
    """A started broker whose PLAIN users are `admin` and `users`; `mechanisms` are the SASL ones it enables."""
    sasl, plain = free_ports(2)
    proc = BrokerProcess(data_dir, {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl},PLAINTEXT://127.0.0.1:{plain}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": ",".join(mechanisms),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(users),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        **(overrides or {}),
    }, port=sasl)
    try:
        proc.start()
    except BaseException:
        proc.cleanup()
        raise
    return SaslBroker(proc, f"127.0.0.1:{sasl}")
