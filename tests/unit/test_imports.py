"""Every module of the package imports: a mistake that only shows at import time (a dataclass default that is not
allowed, a circular import) would otherwise surface only in the process that happens to load that module."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

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


def loaded_by(module: str, candidates: tuple[str, ...]) -> list[str]:
    """Which of `candidates` importing `module` loads, in a fresh interpreter."""
    code = f"import sys, {module}; print(' '.join(m for m in {candidates!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    return result.stdout.split()


def test_the_command_lines_client_settings_load_no_oauth_libraries() -> None:
    # Every command of the CLI (and each Connect worker and mirror) imports them: kafka-python's oauth module and
    # PyJWT with its cryptography once added half a second to each run, minutes to the test suite.
    for module in ("moldau.cli.command_config", "moldau.security.sasl.client"):
        assert loaded_by(module, ("kafka", "jwt", "cryptography")) == [], module


def test_produce_and_consume_load_the_registrys_serializers_only_for_a_format() -> None:
    # confluent-kafka's registry client and Protobuf cost each run half a second (moldau.cli.format_options).
    for module in ("moldau.cli.produce", "moldau.cli.consume", "moldau.cli.share"):
        assert loaded_by(module, ("confluent_kafka.schema_registry", "google.protobuf", "moldau.cli.serde")) == [], \
            module


def test_a_broker_loads_the_consoles_pages_on_their_first_request_only() -> None:
    # They were half of a broker's start-up imports (moldau.console.listener).
    assert loaded_by("moldau.server.broker", ("moldau.console.pages", "moldau.console.clients", "jinja2")) == []


def test_a_broker_loads_no_client_library_and_no_jwt_unless_configured() -> None:
    # kafka-python's record module loads its whole client (a sixth of a second of each start, in every broker a
    # test starts); the broker reads records with moldau.protocol.record_codec. PyJWT is for OAUTHBEARER only.
    assert loaded_by("moldau.server.broker", ("kafka", "jwt", "cryptography")) == []


def test_the_command_lines_settings_load_no_codec_or_scram_library() -> None:
    # Every command of the CLI reads the configuration and the SASL client settings; cramjam, lz4, zstandard
    # (through recompression), drop-behind's ctypes and scramp were a third of each command's start.
    for module in ("moldau.cli.command_config", "moldau.config"):
        unwanted = ("cramjam", "lz4", "zstandard", "moldau.storage.drop_behind", "scramp", "moldau.metadata.records")
        assert loaded_by(module, unwanted) == [], module
