"""The principal of a mutual-TLS client: `User:<certificate subject>`, as Kafka's default principal builder.

Kafka names a client certificate's subject in RFC 2253 form, most specific part first (`CN=alice,OU=eng,O=Acme`),
with the short attribute names RFC 2253 defines (CN, L, ST, O, OU, C, STREET, DC, UID) and any other attribute as
its dotted OID with the DER value in hex (`1.2.840.113549.1.9.1=#16...` for an e-mail address).
`ssl.principal.mapping.rules` then turns that name into the user name: a comma-separated list of
`RULE:pattern/replacement/[LU]` (the pattern must match the whole name; `$1` in the replacement is its first
group; `L`/`U` lower- or upper-case the result) and `DEFAULT` (the name unchanged); the first rule whose pattern
matches decides, and a name no rule matches is refused, as in Kafka. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from moldau.security.principal import KafkaPrincipal

# The names Python's ssl module gives subject attributes -> RFC 2253's short names.
_SHORT_NAMES = {
    "commonName": "CN", "localityName": "L", "stateOrProvinceName": "ST", "organizationName": "O",
    "organizationalUnitName": "OU", "countryName": "C", "streetAddress": "STREET", "domainComponent": "DC",
    "userId": "UID",
}
# Attributes without an RFC 2253 name: their OID and the DER string tag of their value.
_OIDS = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16), "serialNumber": ("2.5.4.5", 0x13),
         "title": ("2.5.4.12", 0x0C), "surname": ("2.5.4.4", 0x0C), "givenName": ("2.5.4.42", 0x0C),
         "initials": ("2.5.4.43", 0x0C), "pseudonym": ("2.5.4.65", 0x0C), "generationQualifier": ("2.5.4.44", 0x0C),
         "dnQualifier": ("2.5.4.46", 0x13), "businessCategory": ("2.5.4.15", 0x0C), "postalCode": ("2.5.4.17", 0x0C)}

Subject = Sequence[Sequence[tuple[str, str]]]
"""A certificate subject as `SSLObject.getpeercert()["subject"]` gives it: RDNs in certificate order."""


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and (i == 0 or i == len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_hex(tag: int, value: str) -> str:
    data = value.encode()
    if len(data) < 0x80:
        length = bytes([len(data)])
    else:
        size = len(data).to_bytes((len(data).bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(size)]) + size
    return "#" + (bytes([tag]) + length + data).hex()


def _attribute(name: str, value: str) -> str:
    if name in _SHORT_NAMES:
        return f"{_SHORT_NAMES[name]}={_escape(value)}"
    if name in _OIDS:
        oid, tag = _OIDS[name]
        return f"{oid}={_der_hex(tag, value)}"
    return f"{name}={_escape(value)}"


def subject_name(subject: Subject) -> str:
    """The subject in RFC 2253 form: RDNs most specific first, a multi-valued RDN joined with `+`."""
    return ",".join("+".join(_attribute(name, value) for name, value in rdn) for rdn in reversed(list(subject)))


class NoMatchingRule(ValueError):
    """No `ssl.principal.mapping.rules` entry matches a certificate's subject."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        result = match.expand(self.replacement)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


_RULE = re.compile(r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\/|[^/])*)/(?P<replacement>(?:\\/|[^/])*)"
                   r"/(?P<case>[LU]?))\s*(?:,|\Z)")


def _java_replacement(text: str) -> str:
    """A Java replacement string (`$1`, `\\$`) as Python's `Match.expand` template."""
    text = text.replace("\\/", "/")
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append("\\\\" if text[i + 1] == "\\" else text[i + 1])
            i += 2
        elif ch == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append(f"\\g<{text[i + 1:j]}>")
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class PrincipalMapper:
    """`ssl.principal.mapping.rules`, parsed once."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        text, pos = rules.strip(), 0
        while pos < len(text):
            match = _RULE.match(text, pos)
            if match is None or match.end() == pos:
                raise ValueError(f"ssl.principal.mapping.rules: cannot parse {text[pos:]!r}; expected "
                                 "RULE:pattern/replacement/[LU] or DEFAULT")
            if match["default"]:
                self.rules.append(_Rule(None))
            else:
                try:
                    pattern = re.compile(match["pattern"].replace("\\/", "/"))
                except re.error as exc:
                    raise ValueError(f"ssl.principal.mapping.rules: bad pattern {match['pattern']!r}: {exc}"
                                     ) from None
                self.rules.append(_Rule(pattern, _java_replacement(match["replacement"]), match["case"]))
            pos = match.end()
        if not self.rules:
            self.rules.append(_Rule(None))

    def user_name(self, subject: str) -> str:
        for rule in self.rules:
            name = rule.apply(subject)
            if name is not None:
                return name
        raise NoMatchingRule(f"no ssl.principal.mapping.rules entry matches {subject}")

    def principal(self, peer_certificate: dict[str, object] | None) -> KafkaPrincipal | None:
        """`User:<mapped subject>` for a verified peer certificate (`getpeercert()`), None without one."""
        if not peer_certificate:
            return None
        subject = peer_certificate.get("subject")
        if not isinstance(subject, tuple):
            return None
        return KafkaPrincipal.user(self.user_name(subject_name(subject)))
