"""Compatibility levels: which directions and which earlier versions each level checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from moldau.registry.compatibility import CompatibilityLevel, compatibility_errors
from moldau.registry.formats import ParsedSchema, parse_schema


def user(*fields: dict[str, Any]) -> ParsedSchema:
    return parse_schema("AVRO", json.dumps({"type": "record", "name": "User", "fields": list(fields)}), {})


A = {"name": "a", "type": "int"}
B_REQUIRED = {"name": "b", "type": "int"}
C_OPTIONAL = {"name": "c", "type": "int", "default": 0}


def test_levels_parse_from_confluent_names() -> None:
    assert [level.value for level in CompatibilityLevel] == [
        "NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"]
    assert CompatibilityLevel("FULL_TRANSITIVE").transitive


def test_backward_means_new_reads_old() -> None:
    old, new = user(A), user(A, B_REQUIRED)
    errors = compatibility_errors(CompatibilityLevel.BACKWARD, new, [old])
    assert len(errors) == 1
    assert errors[0].startswith("BACKWARD: the new schema cannot read data written with live version 1 of 1 (latest):"
                                " READER_FIELD_MISSING_DEFAULT_VALUE: field 'b'")
    assert compatibility_errors("FORWARD", new, [old]) == []  # the old reader ignores the new field


def test_forward_means_old_reads_new() -> None:
    old, new = user(A, B_REQUIRED), user(A)
    assert compatibility_errors("BACKWARD", new, [old]) == []
    errors = compatibility_errors("FORWARD", new, [old])
    assert len(errors) == 1 and errors[0].startswith(
        "FORWARD: live version 1 of 1 (latest) cannot read data written with the new schema: "
        "READER_FIELD_MISSING_DEFAULT_VALUE")
    assert len(compatibility_errors("FULL", new, [old])) == 1


def test_none_and_first_version_accept_anything() -> None:
    assert compatibility_errors("NONE", user(A), [user(B_REQUIRED)]) == []
    assert compatibility_errors("FULL_TRANSITIVE", user(A), []) == []


def test_transitive_levels_check_every_live_version() -> None:
    # v1 has only b; v2 drops b and adds a with a default; v3 (new) makes a required and keeps c optional.
    v1 = user(B_REQUIRED)
    v2 = user({**A, "default": 1}, C_OPTIONAL)
    new = user(A, C_OPTIONAL)
    assert compatibility_errors("BACKWARD", new, [v1, v2]) == []
    errors = compatibility_errors("BACKWARD_TRANSITIVE", new, [v1, v2])
    assert len(errors) == 1 and "live version 1 of 2:" in errors[0] and "field 'a'" in errors[0]


@pytest.mark.parametrize("level", list(CompatibilityLevel))
def test_identical_schema_is_compatible_at_every_level(level: CompatibilityLevel) -> None:
    schema = user(A, C_OPTIONAL)
    assert compatibility_errors(level, schema, [schema, schema]) == []
