"""Kafka principals: `<type>:<name>`, e.g. `User:alice`.

Kafka's default principal builder gives `User:ANONYMOUS` to PLAINTEXT connections (and to SSL ones without a
client certificate), `User:<authorization id>` after SASL, and `User:<certificate subject>` after mutual TLS.
ACLs and quotas name principals the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    # Authenticated with a delegation token (KIP-48): it acts as the token's owner, but may not create, renew or
    # expire tokens. Not part of equality, as in Kafka: ACLs and quotas see the owner.
    token_authenticated: bool = field(default=False, compare=False)

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` -> KafkaPrincipal("User", "alice"); the name may itself contain colons."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"a principal is TYPE:NAME, such as User:alice, not {text!r}")
        return cls(principal_type, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
