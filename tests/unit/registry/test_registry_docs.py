"""docs/registry.md's endpoint table lists exactly the routes the registry's app serves."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.routing import Route

from moldau.registry.core import RegistryCore
from moldau.registry.http.app import build_app
from tests.unit.registry.registry_support import MemoryStore

ROOT = Path(__file__).resolve().parents[3]


def test_endpoint_table_matches_the_routes() -> None:
    text = (ROOT / "docs" / "registry.md").read_text()
    documented = {(path, frozenset(m.strip() for m in methods.split(",")))
                  for methods, path in re.findall(r"^\| ([A-Z, ]+) \| `(/[^`]*)` \|", text, re.M)}
    core = RegistryCore()
    app = build_app(core, MemoryStore(core))
    served = {(re.sub(r":\w+}", "}", r.path), frozenset(r.methods or ()) - {"HEAD"})
              for r in app.routes if isinstance(r, Route)}
    assert documented == served
