"""The docs describe what the code does: tables that mirror code are checked against it."""

from __future__ import annotations

import re
from pathlib import Path

from moldau.server.handlers.registry import APIS, CONTROLLER_APIS

ROOT = Path(__file__).resolve().parents[2]


def test_protocol_doc_lists_exactly_the_served_api_versions() -> None:
    text = (ROOT / "docs" / "protocol.md").read_text()
    client_table, controller_table = text.split("| key | controller API |", 1)
    assert _table(client_table) == {(a.key, a.name, a.min_version, a.max_version) for a in APIS.values()}
    assert _table(controller_table) == {(a.key, a.name, a.min_version, a.max_version)
                                        for a in CONTROLLER_APIS.values()}


def _table(text: str) -> set[tuple[int, str, int, int]]:
    return {(int(k), name, int(lo), int(hi))
            for k, name, lo, hi in re.findall(r"^\| (\d+) \| (\w+) \| (\d+) \| (\d+) \|$", text, re.M)}


def test_readme_opens_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["./dev server", "./dev test"]
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("exec ./dev test")


def test_configuration_doc_is_generated_from_the_code() -> None:
    from moldau.config_doc import render

    assert (ROOT / "docs" / "configuration.md").read_text() == render(), (
        "regenerate it: python -m moldau.config_doc > docs/configuration.md")
