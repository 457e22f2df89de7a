"""Kafka principals as ACLs, quotas and the CLI write them."""

from __future__ import annotations

import pytest

from moldau.security.principal import ANONYMOUS, KafkaPrincipal


def test_principals_parse_and_print_as_kafka_writes_them() -> None:
    alice = KafkaPrincipal.parse("User:alice")
    assert alice == KafkaPrincipal.user("alice") and str(alice) == "User:alice"
    assert KafkaPrincipal.parse("User:CN=a,O=b:c").name == "CN=a,O=b:c"
    assert str(ANONYMOUS) == "User:ANONYMOUS"


@pytest.mark.parametrize("text", ["alice", "User:", ":alice", ""])
def test_a_principal_without_type_or_name_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="TYPE:NAME"):
        KafkaPrincipal.parse(text)
