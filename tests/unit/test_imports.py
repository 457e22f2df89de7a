"""Every module of the package imports: a mistake that only shows at import time (a dataclass default that is not
allowed, a circular import) would otherwise surface only in the process that happens to load that module."""

from __future__ import annotations

import importlib
import pkgutil

import moldau


def test_every_module_imports() -> None:
    failures = {}
    for module in pkgutil.walk_packages(moldau.__path__, "moldau."):
        if module.name == "moldau.__main__":  # runs the command line
            continue
        try:
            importlib.import_module(module.name)
        except Exception as exc:  # every failure is reported, with its module
            failures[module.name] = f"{type(exc).__name__}: {exc}"
    assert not failures, failures
