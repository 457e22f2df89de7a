"""KIP-507's signed requests between workers (`connect.protocol=sessioned`), without I/O: session keys, their
record in the config topic, signing a request body and checking a signature, as Kafka Connect does them.

- The leader generates a session key (`inter.worker.key.generation.algorithm`, `inter.worker.key.size` bits or
  the algorithm's default size) and writes it to the config topic under the key `session-key` as
  `{"key": <base64>, "algorithm": ..., "creation-timestamp": <ms>}`; it writes a new one once the key is
  `inter.worker.key.ttl.ms` old, or when its own config asks for another algorithm or size.
- A worker sending a request only the leader may receive signs the body with the latest key it read: header
  `X-Connect-Authorization` (the base64 HMAC of the body) and `X-Connect-Request-Signature-Algorithm`
  (`inter.worker.signature.algorithm`).
- The leader checks it against its latest key, with an algorithm of `inter.worker.verification.algorithms`.
  Kafka's answers: no signature 400, an algorithm that is not a MAC algorithm or not accepted 400, a signature
  that is not base64 400, no key read yet 503, a wrong signature (also one made with a key rotated away) 403.

Algorithms are Java's MAC names; the HMACs are the standard library's `hmac` (with `hashlib`'s digests), and
the keys come from an injected source of random bytes (`secrets.token_bytes` in the worker).
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ALGORITHM_HEADER", "DEFAULT_ALGORITHM", "MAC_ALGORITHMS", "SESSION_KEY_RECORD", "SIGNATURE_HEADER",
    "KeyPolicy", "Refusal", "SessionKey", "algorithm_error", "sign", "verify",
]

SIGNATURE_HEADER = "X-Connect-Authorization"
ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"
SESSION_KEY_RECORD = "session-key"
DEFAULT_ALGORITHM = "HmacSHA256"

# Java's MAC algorithm names -> (hashlib's name, the key size in bits Java's KeyGenerator makes by default).
MAC_ALGORITHMS: dict[str, tuple[str, int]] = {
    "HmacSHA1": ("sha1", 512),
    "HmacSHA224": ("sha224", 224),
    "HmacSHA256": ("sha256", 256),
    "HmacSHA384": ("sha384", 384),
    "HmacSHA512": ("sha512", 512),
}
MIN_KEY_BITS = 40  # Java's HMAC key generators refuse shorter keys

NO_SIGNATURE = "Internal request missing required signature"
BAD_SIGNATURE = "Internal request contained invalid signature."
NO_KEY_YET = ("This worker is still starting up and has not been able to read a session key from the config "
              "topic yet")


@dataclass(frozen=True)
class SessionKey:
    key: bytes
    algorithm: str
    created_ms: int

    def record(self) -> dict[str, Any]:
        """The value of the config topic's `session-key` record, as Kafka Connect writes it."""
        return {"key": base64.b64encode(self.key).decode(), "algorithm": self.algorithm,
                "creation-timestamp": self.created_ms}

    @classmethod
    def from_record(cls, value: Any) -> SessionKey:
        """The key of a `session-key` record's value. Raises ValueError naming what is wrong."""
        if not isinstance(value, dict):
            raise ValueError("the session key is not a JSON object")
        key, algorithm, created = value.get("key"), value.get("algorithm"), value.get("creation-timestamp")
        if not isinstance(key, str) or not isinstance(algorithm, str):
            raise ValueError("the session key's key and algorithm must be strings")
        if not isinstance(created, int) or isinstance(created, bool):
            raise ValueError("the session key's creation-timestamp must be a long")
        try:
            raw = base64.b64decode(key, validate=True)
        except binascii.Error:
            raise ValueError("the session key's key is not base64") from None
        return cls(raw, algorithm, created)

    def __repr__(self) -> str:  # never the key itself, in logs or tracebacks
        return f"SessionKey(algorithm={self.algorithm}, created_ms={self.created_ms})"


@dataclass(frozen=True)
class KeyPolicy:
    """What the leader's config asks of session keys: `inter.worker.key.*`."""

    algorithm: str = DEFAULT_ALGORITHM
    size_bits: int | None = None
    ttl_ms: int = 3_600_000

    @property
    def size_bytes(self) -> int:
        bits = self.size_bits if self.size_bits is not None else MAC_ALGORITHMS[self.algorithm][1]
        return (bits + 7) // 8

    def generate(self, random_bytes: Callable[[int], bytes], now_ms: int) -> SessionKey:
        return SessionKey(random_bytes(self.size_bytes), self.algorithm, now_ms)

    def expires_ms(self, key: SessionKey) -> int | None:
        """When `key` is due for rotation; None with a TTL of 0, which never rotates."""
        return key.created_ms + self.ttl_ms if self.ttl_ms > 0 else None

    def needs_new_key(self, current: SessionKey | None, now_ms: int) -> bool:
        """Whether the leader must write a new key: none yet, the current one has expired, or it is not of the
        algorithm and size this config asks for (Kafka's leader checks the same three)."""
        if current is None:
            return True
        expires = self.expires_ms(current)
        if expires is not None and expires <= now_ms:
            return True
        return current.algorithm != self.algorithm or len(current.key) != self.size_bytes


def _mac(key: bytes, algorithm: str, body: bytes) -> bytes:
    return hmac.new(key, body, MAC_ALGORITHMS[algorithm][0]).digest()


def sign(key: SessionKey, algorithm: str, body: bytes) -> dict[str, str]:
    """The headers that sign `body` with `key`, by `algorithm` (`inter.worker.signature.algorithm`)."""
    return {SIGNATURE_HEADER: base64.b64encode(_mac(key.key, algorithm, body)).decode(), ALGORITHM_HEADER: algorithm}


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str


def verify(headers: Mapping[str, str], body: bytes, key: SessionKey | None, accepted: tuple[str, ...]
           ) -> Refusal | None:
    """None when the request is signed with `key` by an algorithm of `accepted`; else Kafka Connect's answer.
    `headers` are looked up by their exact names: pass a case-insensitive mapping (Starlette's Headers)."""
    algorithm, signature = headers.get(ALGORITHM_HEADER), headers.get(SIGNATURE_HEADER)
    if algorithm is None or signature is None:
        return Refusal(400, NO_SIGNATURE)
    if algorithm not in MAC_ALGORITHMS:
        return Refusal(400, f"Algorithm {algorithm} not available")
    if algorithm not in accepted:
        return Refusal(400, f"This worker does not support the '{algorithm}' key signing algorithm used by other "
                            f"workers. This worker is currently configured to use: [{', '.join(accepted)}]. Check "
                            "that all workers' configuration files permit the same set of signature algorithms, "
                            "and correct any misconfigured worker and restart it.")
    try:
        given = base64.b64decode(signature, validate=True)
    except binascii.Error as exc:
        return Refusal(400, f"Illegal base64 signature: {exc}")
    if key is None:
        return Refusal(503, NO_KEY_YET)
    if not hmac.compare_digest(_mac(key.key, algorithm, body), given):
        return Refusal(403, BAD_SIGNATURE)
    return None


def algorithm_error(algorithm: str) -> str | None:
    """Why `algorithm` cannot sign or check requests, or None."""
    if algorithm in MAC_ALGORITHMS:
        return None
    return f"the algorithm is not supported; the supported algorithms are: {', '.join(MAC_ALGORITHMS)}"
