"""`moldau connect distributed WORKER.properties`: one worker of a Connect cluster. It reads its three topics,
joins the group `group.id`, serves the REST API (forwarding what only the leader may do), and runs what the
group assigns it until SIGTERM or SIGINT; then it leaves the group (its work moves to the others at once),
stops its tasks (committing what was acknowledged or flushed) and exits 0."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

from moldau.config.properties import load_properties
from moldau.connect.distributed.herder import DistributedHerder
from moldau.connect.errors import ConfigException, ConnectException
from moldau.connect.plugins import PluginRegistry
from moldau.connect.rest import build_admin_app, build_app
from moldau.connect.worker.rest_serving import RestServing
from moldau.connect.worker.standalone import ClusterId
from moldau.connect.worker.worker_config import WorkerConfig

__all__ = ["DistributedError", "run_distributed"]

log = logging.getLogger(__name__)


class DistributedError(Exception):
    """A worker config, or a Kafka cluster, that stops the worker from starting."""


def load_worker(path: str | Path) -> WorkerConfig:
    try:
        return WorkerConfig.parse(load_properties(path), standalone=False)
    except ConfigException as exc:
        raise DistributedError(f"{path}: {exc}") from None
    except OSError as exc:
        raise DistributedError(f"cannot read {path}: {exc.strerror or exc}") from None


def run_distributed(worker_path: str | Path) -> int:
    worker = load_worker(worker_path)
    registry = PluginRegistry.discover(worker.values["plugin.path"])
    try:
        herder = DistributedHerder(worker, registry)
    except ConfigException as exc:  # the TLS settings of requests to other workers
        raise DistributedError(f"{worker_path}: {exc}") from None
    return asyncio.run(_serve(herder))


async def _serve(herder: DistributedHerder) -> int:
    try:
        serving = RestServing(herder.worker)
        serving.bind()
    except ConnectException as exc:
        raise DistributedError(str(exc)) from None
    try:
        await asyncio.to_thread(herder.start)
    except ConnectException as exc:
        serving.close()
        raise DistributedError(str(exc)) from None
    cluster_id = ClusterId(herder)
    serving.start(build_app(herder, cluster_id, herder.internal_routes(), herder.peers.call,
                            admin=serving.admin_on_api_listeners), build_admin_app(herder, cluster_id))
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    log.info("connect: distributed worker %s of group %s, REST API on %s", herder.worker_id,
             herder.worker.values["group.id"], herder.worker.rest_url())
    await stopping.wait()
    log.info("connect: stopping")
    await asyncio.to_thread(herder.shutdown)
    await serving.stop()
    return 0
