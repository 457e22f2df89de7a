"""SCRAM credentials as the cluster stores them (KIP-554).

A user's credential for one mechanism is (salt, stored key, server key, iterations), never the password: the
broker can check a client's proof and prove itself with these, but cannot recover the password. Admin clients
send the salted password (RFC 5802 `Hi(password, salt, i)`) in AlterUserScramCredentials; the controller turns
it into stored and server keys, exactly as `scramp` does when it makes credentials from a password.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.metadata.records import UserScramCredentialRecord

if TYPE_CHECKING:
    from moldau.metadata.image import MetadataImage

# Kafka's ScramMechanism type codes in DescribeUserScramCredentials / AlterUserScramCredentials.
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
MECHANISM_CODES: dict[str, int] = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
MECHANISM_NAMES: dict[int, str] = {code: name for name, code in MECHANISM_CODES.items()}
_DIGEST_NAMES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}

# Kafka's bounds for iterations in AlterUserScramCredentials.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")."""
    digest = _DIGEST_NAMES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802 (PBKDF2 with the mechanism's HMAC), as an admin client computes it."""
    return hashlib.pbkdf2_hmac(_DIGEST_NAMES[mechanism], password.encode(), salt, iterations)


def digest_size(mechanism: str) -> int:
    return hashlib.new(_DIGEST_NAMES[mechanism]).digest_size


def credential_of(record: UserScramCredentialRecord) -> ScramCredential:
    return ScramCredential(base64.b64decode(record.salt), base64.b64decode(record.stored_key),
                           base64.b64decode(record.server_key), record.iterations)


def record_of(user: str, mechanism: str, credential: ScramCredential) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(user, MECHANISM_CODES[mechanism], _b64(credential.salt),
                                     _b64(credential.stored_key), _b64(credential.server_key), credential.iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def image_lookup(image: Callable[[], MetadataImage]) -> Callable[[str, str], ScramCredential | None]:
    """(mechanism, user) -> credential, read from the current metadata image at each authentication."""
    def lookup(mechanism: str, user: str) -> ScramCredential | None:
        code = MECHANISM_CODES.get(mechanism)
        record = image().scram_credentials.get((user, code)) if code is not None else None
        return None if record is None else credential_of(record)
    return lookup
