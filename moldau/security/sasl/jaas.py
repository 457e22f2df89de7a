"""Kafka's JAAS configuration strings, as used in `sasl.jaas.config`.

A value names one login module, its control flag and options, and ends with a semicolon::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

Option values are either double-quoted (a backslash escapes the next character) or bare words. For the PLAIN
login module, `user_<name>="<password>"` options are the users the broker accepts, and `username` /
`password` are the broker's own credentials for its outbound (inter-broker) connections. SCRAM login modules
carry only the broker's own `username` / `password`; SCRAM users live in the metadata log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

CONTROL_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


class JaasConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class JaasConfig:
    login_module: str
    control_flag: str
    options: Mapping[str, str] = field(default_factory=dict)

    def users(self) -> dict[str, str]:
        """PLAIN users: `user_<name>` options, name -> password."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")


def parse_jaas_config(text: str) -> JaasConfig:
    """Parse one login module entry; raises JaasConfigError on anything malformed."""
    tokens = _tokenize(text)
    if not tokens or tokens[-1] != (";", False):
        raise JaasConfigError("a JAAS configuration must end with ';'")
    tokens.pop()
    if any(t == (";", False) for t in tokens):
        raise JaasConfigError("sasl.jaas.config takes exactly one login module")
    if len(tokens) < 2:
        raise JaasConfigError("a JAAS configuration is '<LoginModule> <flag> [key=value ...];'")
    (module, module_quoted), (flag, flag_quoted) = tokens[0], tokens[1]
    if module_quoted or flag_quoted or module == "=":
        raise JaasConfigError("a JAAS configuration starts with the login module class and its control flag")
    if flag.lower() not in CONTROL_FLAGS:
        raise JaasConfigError(f"invalid control flag {flag!r}: expected one of {', '.join(sorted(CONTROL_FLAGS))}")
    options: dict[str, str] = {}
    rest = tokens[2:]
    if len(rest) % 3:
        raise JaasConfigError("login module options are key=value pairs")
    for i in range(0, len(rest), 3):
        (key, key_quoted), equals, (value, _) = rest[i], rest[i + 1], rest[i + 2]
        if key_quoted or key == "=" or equals != ("=", False) or (value == "=" and not rest[i + 2][1]):
            raise JaasConfigError(f"expected key=value near {key!r}")
        if key in options:
            raise JaasConfigError(f"option {key!r} is given twice")
        options[key] = value
    return JaasConfig(module, flag.lower(), options)


def _tokenize(text: str) -> list[tuple[str, bool]]:
    """Words, '=' and ';' as (text, quoted)."""
    tokens: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            tokens.append((c, False))
            i += 1
        elif c == '"':
            i += 1
            out: list[str] = []
            while True:
                if i >= n:
                    raise JaasConfigError("unterminated quoted value")
                c = text[i]
                if c == "\\":
                    if i + 1 >= n:
                        raise JaasConfigError("unterminated quoted value")
                    out.append(text[i + 1])
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    out.append(c)
                    i += 1
            tokens.append(("".join(out), True))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            tokens.append((text[start:i], False))
    return tokens
