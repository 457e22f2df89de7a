"""`moldau configs --add-config` reads Kafka's syntax: comma-separated pairs, a value with commas in brackets."""

from __future__ import annotations

import pytest

from moldau.cli.common import CliError
from moldau.cli.configs import parse_add_config


def test_pairs_and_bracketed_lists() -> None:
    assert parse_add_config("a=1,b=2") == [("a", "1"), ("b", "2")]
    assert parse_add_config("cleanup.policy=[compact,delete], retention.ms=1000") == [
        ("cleanup.policy", "compact,delete"), ("retention.ms", "1000")]
    assert parse_add_config("sasl.jaas.config=x=y;") == [("sasl.jaas.config", "x=y;")]  # only the first = splits
    assert parse_add_config("a=,") == [("a", "")]


@pytest.mark.parametrize("text", ["novalue", "=1", "a=1,b"])
def test_a_pair_without_a_key_or_value_is_refused(text: str) -> None:
    with pytest.raises(CliError, match="expected key=value"):
        parse_add_config(text)
