"""A broker whose console's client listener is SASL_PLAINTEXT with an authorizer, for the console's sign-in, ACL
and quota tests: `admin` (PLAIN) is the super user, `alice` and `carol` (PLAIN) and `bob` (SCRAM-SHA-512) are
ordinary users whose ACLs the tests set. The console connects to the first listener, so the SASL one comes first;
the brokers' own traffic stays on a PLAINTEXT listener."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.sasl import create_scram_users
from tests.support.sasl_broker import SaslBroker, password, start_sasl_broker

__all__ = ["PASSWORDS", "SecuredBroker", "http", "start_secured_broker"]

PASSWORDS = {user: password(user) for user in ("admin", "alice", "bob", "carol")}
SecuredBroker = SaslBroker


def start_secured_broker(data_dir: Path, overrides: dict[str, str] | None = None) -> SecuredBroker:
    broker = start_sasl_broker(data_dir, ("alice", "carol"), ("PLAIN", "SCRAM-SHA-512"), overrides)
    try:
        create_scram_users(broker.bootstrap, {"SCRAM-SHA-512": ("bob", PASSWORDS["bob"])})
    except BaseException:
        broker.stop()
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
