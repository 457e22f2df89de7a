"""Standalone mode: one worker process, connector configs from files (and the REST API, kept in memory), source
offsets in `offset.storage.file.filename`. Runs until SIGTERM or SIGINT, then stops every task (committing
what was acknowledged or flushed) and exits 0."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Sequence
from pathlib import Path

from moldau.config.properties import load_properties
from moldau.connect.errors import ConfigException, ConnectException
from moldau.connect.plugins import PluginRegistry
from moldau.connect.rest import build_admin_app, build_app
from moldau.connect.worker.herder import Herder, HerderError
from moldau.connect.worker.offsets_admin import cluster_id
from moldau.connect.worker.rest_serving import RestServing
from moldau.connect.worker.stores import FileOffsetStore, MemoryConfigStore, MemoryStatusStore
from moldau.connect.worker.worker_config import NAME, WorkerConfig, load_connector_file

__all__ = ["StandaloneError", "run_standalone"]

log = logging.getLogger(__name__)

class StandaloneError(Exception):
    """A worker or connector config that stops standalone mode from starting."""


def build_herder(worker_path: str | Path) -> Herder:
    try:
        worker = WorkerConfig.parse(load_properties(worker_path), standalone=True)
    except ConfigException as exc:
        raise StandaloneError(f"{worker_path}: {exc}") from None
    except OSError as exc:
        raise StandaloneError(f"cannot read {worker_path}: {exc.strerror or exc}") from None
    registry = PluginRegistry.discover(worker.values["plugin.path"])
    offsets = FileOffsetStore(worker.values["offset.storage.file.filename"])
    return Herder(worker, registry, MemoryConfigStore(), offsets, MemoryStatusStore())


def _connector_configs(paths: Sequence[str | Path]) -> list[dict[str, str]]:
    configs = []
    for path in paths:
        try:
            config = load_connector_file(path)
        except (OSError, ValueError, ConfigException) as exc:
            raise StandaloneError(f"cannot read connector config {path}: {exc}") from None
        if not config.get(NAME):
            raise StandaloneError(f"{path}: the connector config has no name")
        configs.append(config)
    return configs


def run_standalone(worker_path: str | Path, connector_paths: Sequence[str | Path]) -> int:
    herder = build_herder(worker_path)
    connectors = _connector_configs(connector_paths)
    return asyncio.run(_serve(herder, connectors))


class ClusterId:
    """The cluster id, asked once from the brokers (and again while none answered)."""

    def __init__(self, herder: Herder) -> None:
        self.herder = herder
        self.value: str | None = None
        self.lock = threading.Lock()

    def __call__(self) -> str | None:
        with self.lock:
            if self.value is None:
                self.value = cluster_id(self.herder.worker)
            return self.value


async def _serve(herder: Herder, connectors: list[dict[str, str]]) -> int:
    try:
        serving = RestServing(herder.worker)
        serving.bind()
    except ConnectException as exc:
        raise StandaloneError(str(exc)) from None
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    cluster_id = ClusterId(herder)
    serving.start(build_app(herder, cluster_id, admin=serving.admin_on_api_listeners),
                  build_admin_app(herder, cluster_id))
    log.info("connect: REST API on %s (worker %s)", herder.worker.rest_url(), herder.worker_id)
    code = 0
    for connector in connectors:
        try:
            await asyncio.to_thread(herder.put_connector, connector[NAME], connector, False)
            log.info("connect: connector %s created", connector[NAME])
        except HerderError as exc:
            log.error("connect: connector %s: %s", connector[NAME], exc.message)
            stopping.set()
            code = 1
    await stopping.wait()
    log.info("connect: stopping")
    await asyncio.to_thread(herder.stop_all)
    await serving.stop()
    return code
