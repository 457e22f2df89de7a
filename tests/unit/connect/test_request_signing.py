"""KIP-507's signed requests between workers, without I/O: session keys from an injected random source, their
config topic record, signing, Kafka Connect's answers to unsigned or badly signed requests, and when the leader
writes a new key (an injected clock: plain millisecond numbers)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from starlette.datastructures import Headers

from moldau.connect.distributed.request_signing import (
    ALGORITHM_HEADER,
    SIGNATURE_HEADER,
    KeyPolicy,
    SessionKey,
    sign,
    verify,
)
from moldau.connect.errors import ConfigException
from moldau.connect.worker.worker_config import WorkerConfig

BODY = b'[{"task.class":"FileStreamSourceTask","file":"in.txt"}]'
KEY = SessionKey(b"k" * 32, "HmacSHA256", 1_000)
ACCEPTED = ("HmacSHA256",)


def counting(size: int) -> bytes:
    return bytes(range(size))


def test_keys_come_from_the_random_source_in_the_algorithm_s_default_size() -> None:
    assert KeyPolicy().generate(counting, 5) == SessionKey(bytes(range(32)), "HmacSHA256", 5)
    assert len(KeyPolicy("HmacSHA512").generate(counting, 0).key) == 64
    assert len(KeyPolicy("HmacSHA1").generate(counting, 0).key) == 64  # Java's HmacSHA1 generator: 512 bits
    assert len(KeyPolicy(size_bits=44).generate(counting, 0).key) == 6  # rounded up to whole bytes, as Java does


def test_the_record_is_kafka_connect_s() -> None:
    record = KEY.record()
    assert record == {"key": base64.b64encode(b"k" * 32).decode(), "algorithm": "HmacSHA256",
                      "creation-timestamp": 1_000}
    assert SessionKey.from_record(record) == KEY
    assert "k" * 8 not in repr(KEY)  # never the key in a log line


@pytest.mark.parametrize("value", [
    [], {"algorithm": "HmacSHA256", "creation-timestamp": 1}, {"key": "a2V5", "algorithm": 1, "creation-timestamp": 1},
    {"key": "not base64!", "algorithm": "HmacSHA256", "creation-timestamp": 1},
    {"key": "a2V5", "algorithm": "HmacSHA256", "creation-timestamp": "1"},
    {"key": "a2V5", "algorithm": "HmacSHA256", "creation-timestamp": True},
])
def test_malformed_records_are_refused(value: Any) -> None:
    with pytest.raises(ValueError):
        SessionKey.from_record(value)


def test_signatures_are_the_base64_hmac_of_the_body() -> None:
    # RFC 2104 HMAC-SHA256's well-known answer for this key and message.
    key = SessionKey(b"key", "HmacSHA256", 0)
    headers = sign(key, "HmacSHA256", b"The quick brown fox jumps over the lazy dog")
    assert base64.b64decode(headers[SIGNATURE_HEADER]).hex() == \
        "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
    assert headers[ALGORITHM_HEADER] == "HmacSHA256"


def test_a_request_signed_with_the_key_passes_whatever_the_header_case() -> None:
    headers = Headers({name.lower(): value for name, value in sign(KEY, "HmacSHA256", BODY).items()})
    assert verify(headers, BODY, KEY, ACCEPTED) is None


def _refusal(headers: dict[str, str], body: bytes = BODY, key: SessionKey | None = KEY,
             accepted: tuple[str, ...] = ACCEPTED) -> tuple[int, str]:
    refusal = verify(Headers(headers), body, key, accepted)
    assert refusal is not None
    return refusal.status, refusal.message


def test_kafka_connect_s_answers_to_bad_requests() -> None:
    signed = sign(KEY, "HmacSHA256", BODY)
    assert _refusal({}) == (400, "Internal request missing required signature")
    assert _refusal({SIGNATURE_HEADER: signed[SIGNATURE_HEADER]})[0] == 400
    assert _refusal({**signed, ALGORITHM_HEADER: "HmacMD4"}) == (400, "Algorithm HmacMD4 not available")
    status, message = _refusal(sign(KEY, "HmacSHA512", BODY))
    assert status == 400 and "does not support the 'HmacSHA512' key signing algorithm" in message
    assert _refusal({**signed, SIGNATURE_HEADER: "%%%"})[0] == 400
    assert _refusal(signed, key=None)[0] == 503
    assert _refusal(signed, body=BODY + b" ") == (403, "Internal request contained invalid signature.")
    rotated = SessionKey(b"n" * 32, "HmacSHA256", 2_000)
    assert _refusal(signed, key=rotated) == (403, "Internal request contained invalid signature.")
    assert verify(Headers(sign(KEY, "HmacSHA512", BODY)), BODY, KEY, ("HmacSHA256", "HmacSHA512")) is None


def test_when_the_leader_writes_a_new_key() -> None:
    policy = KeyPolicy(ttl_ms=60_000)
    assert policy.needs_new_key(None, 0)
    assert not policy.needs_new_key(KEY, 1_000 + 59_999)
    assert policy.needs_new_key(KEY, 1_000 + 60_000)
    assert policy.expires_ms(KEY) == 61_000
    assert not KeyPolicy(ttl_ms=0).needs_new_key(KEY, 10**15)  # 0: keys never expire
    assert KeyPolicy("HmacSHA512", ttl_ms=60_000).needs_new_key(KEY, 1_000)  # another algorithm
    assert KeyPolicy(size_bits=128, ttl_ms=60_000).needs_new_key(KEY, 1_000)  # another size


DISTRIBUTED = {"key.converter": "x", "value.converter": "x", "group.id": "g", "config.storage.topic": "c",
               "offset.storage.topic": "o", "status.storage.topic": "s"}


def _refused(props: dict[str, str]) -> str:
    with pytest.raises(ConfigException) as raised:
        WorkerConfig.parse({**DISTRIBUTED, **props}, standalone=False)
    return raised.value.name


def test_the_worker_configs() -> None:
    values = WorkerConfig.parse(DISTRIBUTED, standalone=False).values
    assert values["connect.protocol"] == "sessioned" and values["inter.worker.key.ttl.ms"] == 3_600_000
    assert values["inter.worker.verification.algorithms"] == ["HmacSHA256"]
    assert WorkerConfig.parse({**DISTRIBUTED, "connect.protocol": "COMPATIBLE"}, standalone=False)
    assert _refused({"connect.protocol": "signed"}) == "connect.protocol"
    assert _refused({"inter.worker.signature.algorithm": "HmacSHA512"}) == "inter.worker.signature.algorithm"
    assert _refused({"inter.worker.key.generation.algorithm": "AES"}) == "inter.worker.key.generation.algorithm"
    assert _refused({"inter.worker.verification.algorithms": ""}) == "inter.worker.verification.algorithms"
    assert _refused({"inter.worker.key.size": "32"}) == "inter.worker.key.size"
    assert _refused({"inter.worker.key.ttl.ms": "-1"}) == "inter.worker.key.ttl.ms"
