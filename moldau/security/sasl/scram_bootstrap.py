"""SCRAM users written into a new cluster's metadata log: `moldau server --add-scram`.

Kafka seeds SCRAM users before a cluster's first start with `kafka-storage format --add-scram`, so that brokers
can authenticate to each other with SCRAM before any admin could create a user. Moldau has no format step (a node
formats its directories on first start), so `moldau server` takes the same argument, in the same syntax:

    --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]'
    --add-scram 'SCRAM-SHA-512=[name=alice,iterations=8192,salt="c2FsdA==",saltedpassword="..."]'

`name` is required; `password`, or `saltedpassword` with `salt` (both base64); `salt` is random when not given,
`iterations` 4096 unless given (4096 to 16384, Kafka's bounds). Values may be double-quoted.

The active controller writes the credentials with the log's first broker registration, as Kafka's bootstrap
records are written once: on later starts the argument changes nothing, so a user deleted since does not come
back. Give every controller the same arguments, as with `kafka-storage format`.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Callable

from moldau.metadata.records import UserScramCredentialRecord
from moldau.security.sasl.scram import (
    MAX_ITERATIONS,
    MECHANISM_CODES,
    MIN_ITERATIONS,
    credential_from_salted_password,
    digest_size,
    record_of,
    salted_password,
)

DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32
_SPEC = re.compile(r"^\s*([A-Za-z0-9-]+)\s*=\s*\[(.*)\]\s*$", re.DOTALL)
_KEYS = frozenset({"name", "password", "iterations", "salt", "saltedpassword"})


class ScramSpecError(ValueError):
    """An --add-scram argument that cannot be used; the message says why."""


def parse_add_scram(spec: str, random_bytes: Callable[[int], bytes] = os.urandom) -> UserScramCredentialRecord:
    """The credential an --add-scram argument describes. Raises ScramSpecError."""
    matched = _SPEC.match(spec)
    if matched is None:
        raise ScramSpecError(f"--add-scram {spec!r}: expected MECHANISM=[name=...,password=...]")
    mechanism, body = matched.group(1).upper(), matched.group(2)
    if mechanism not in MECHANISM_CODES:
        raise ScramSpecError(f"--add-scram: unknown mechanism {mechanism}: use one of {', '.join(MECHANISM_CODES)}")
    fields = _fields(body)
    name = fields.get("name", "")
    if not name:
        raise ScramSpecError(f"--add-scram {mechanism}: a user name is required (name=...)")
    iterations = _iterations(fields.get("iterations"))
    salt = _base64(fields["salt"], "salt") if "salt" in fields else random_bytes(SALT_BYTES)
    salted = _salted_password(mechanism, fields, salt, iterations)
    return record_of(name, mechanism, credential_from_salted_password(mechanism, salt, salted, iterations))


def _fields(body: str) -> dict[str, str]:
    """key=value pairs separated by commas; a value in double quotes may hold commas."""
    fields: dict[str, str] = {}
    for key, quoted, plain in re.findall(r'\s*([A-Za-z]+)\s*=\s*(?:"([^"]*)"|([^,]*))\s*(?:,|$)', body):
        key = key.lower()
        if key not in _KEYS:
            raise ScramSpecError(f"--add-scram: unknown key {key}: use name, password, iterations, salt or "
                                 "saltedpassword")
        if key in fields:
            raise ScramSpecError(f"--add-scram: {key} is given twice")
        fields[key] = quoted if quoted else plain.strip()
    return fields


def _iterations(text: str | None) -> int:
    if text is None:
        return DEFAULT_ITERATIONS
    try:
        iterations = int(text)
    except ValueError:
        raise ScramSpecError(f"--add-scram: iterations {text!r} is not a number") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramSpecError(f"--add-scram: iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    return iterations


def _salted_password(mechanism: str, fields: dict[str, str], salt: bytes, iterations: int) -> bytes:
    if ("password" in fields) == ("saltedpassword" in fields):
        raise ScramSpecError(f"--add-scram {mechanism}: give either password or saltedpassword (with salt)")
    if "password" in fields:
        return salted_password(mechanism, fields["password"], salt, iterations)
    if "salt" not in fields:
        raise ScramSpecError(f"--add-scram {mechanism}: saltedpassword needs the salt it was made with")
    salted = _base64(fields["saltedpassword"], "saltedpassword")
    if len(salted) != digest_size(mechanism):
        raise ScramSpecError(f"--add-scram {mechanism}: saltedpassword must be {digest_size(mechanism)} bytes")
    return salted


def _base64(text: str, what: str) -> bytes:
    try:
        decoded = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise ScramSpecError(f"--add-scram: {what} is not base64") from None
    if not decoded:
        raise ScramSpecError(f"--add-scram: {what} is empty")
    return decoded
