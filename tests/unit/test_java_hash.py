"""Java's String.hashCode and Kafka's Utils.abs, against values Java computes."""

from __future__ import annotations

import pytest

from moldau.java_hash import INT_MIN, java_string_hash, kafka_abs, to_int32


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0), ("a", 97), ("hello", 99162322), ("Aa", 2112), ("BB", 2112), ("é", 233),
    ("polygenelubricants", INT_MIN),  # the classic String whose hash is Integer.MIN_VALUE
    ("\U0001F600", 31 * 0xD83D + 0xDE00),  # outside the BMP: two UTF-16 code units
    ("groupé", -1237460406),
])
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_int32_wraps_as_java_does_and_kafka_abs_maps_min_value_to_0() -> None:
    assert to_int32(31 * 99162322) == -1220935314
    assert to_int32(2**31) == INT_MIN and to_int32(2**32 + 5) == 5
    assert [kafka_abs(v) for v in (INT_MIN, -7, 7, 0)] == [0, 7, 7, 0]
