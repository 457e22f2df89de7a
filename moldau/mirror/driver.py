"""`moldau mirror run MM2.properties`: MirrorMaker 2's dedicated mode. One process runs, for every flow the
config enables (and every pair that only emits heartbeats), a distributed Connect worker talking to the flow's
target cluster, in the group `<source>-mm2` with the internal topics `mm2-configs|offsets|status.<source>.internal`
there, and makes sure the flow's connectors exist with the configs the file gives:
MirrorSourceConnector and MirrorCheckpointConnector for an enabled flow, MirrorHeartbeatConnector unless
heartbeats are off.

Started on several machines with the same file, the processes join the same groups and share the work (and
take over a dead process's work), as MirrorMaker 2's do. Each flow's worker serves Connect's REST API, which
workers use to reach the group's leader: on `<flow>.listeners` when given (e.g. `east->west.listeners =
https://0.0.0.0:8443` with `east->west.rest.advertised.host.name`, and the TLS settings of a Connect worker,
`east->west.listeners.https.ssl.*`), else on a free port of 127.0.0.1, which is enough for processes on one
machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from moldau.connect.distributed.herder import DistributedHerder
from moldau.connect.errors import ConfigException, ConnectException
from moldau.connect.plugins import PluginRegistry
from moldau.connect.rest import build_admin_app, build_app
from moldau.connect.worker.rest_serving import RestServing
from moldau.connect.worker.standalone import ClusterId
from moldau.connect.worker.worker_config import WorkerConfig
from moldau.mirror.config import Flow, MirrorMakerConfig

__all__ = ["MirrorError", "run_mirror"]

log = logging.getLogger(__name__)

SOURCE, CHECKPOINT, HEARTBEAT = "MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector"
CONNECTOR_WAIT_S = 120.0


class MirrorError(Exception):
    """A config, or a cluster, that stops the mirror from starting."""


@dataclass
class FlowWorker:
    flow: Flow
    herder: DistributedHerder
    url: str  # where this process reaches its own worker's REST API
    tls: ssl.SSLContext | None  # and how, for an https listener (the worker's own stores, as between workers)
    serving: RestServing


def connectors_of(config: MirrorMakerConfig, flow: Flow) -> dict[str, dict[str, str]]:
    """The connectors the flow's worker group runs, by name (MirrorMaker 2's names), with their configs."""
    wanted = {}
    if config.enabled(flow):
        wanted[SOURCE] = config.connector_config(flow, SOURCE, SOURCE)
        wanted[CHECKPOINT] = config.connector_config(flow, CHECKPOINT, CHECKPOINT)
    heartbeats = config.connector_config(flow, HEARTBEAT, HEARTBEAT)
    if heartbeats.get("emit.heartbeats.enabled", "true").strip().lower() != "false":
        wanted[HEARTBEAT] = heartbeats
    return wanted


def _worker_config(config: MirrorMakerConfig, flow: Flow, free_port: int | None = None) -> WorkerConfig:
    """The flow's worker config; without `<flow>.listeners`, an http listener on `free_port` of 127.0.0.1."""
    props = config.worker_config(flow)
    if free_port is not None:
        props.setdefault("listeners", f"http://127.0.0.1:{free_port}")
    try:
        return WorkerConfig.parse(props, standalone=False)
    except ConfigException as exc:
        raise MirrorError(f"worker of flow {flow}: {exc}") from None


def _bind(flow: Flow, worker: WorkerConfig) -> RestServing:
    try:
        serving = RestServing(worker)  # the listeners of `listeners` (and `admin.listeners`), http or https
        serving.bind()
    except ConnectException as exc:
        raise MirrorError(f"worker of flow {flow}: {exc}") from None
    return serving


async def _start_flow(config: MirrorMakerConfig, flow: Flow, registry: PluginRegistry) -> FlowWorker:
    given = "listeners" in config.worker_config(flow)
    worker = _worker_config(config, flow, None if given else 0)
    serving = _bind(flow, worker)
    own = serving.api_listeners[0]
    assert own.socket is not None
    port = own.socket.getsockname()[1]
    if not given:  # the free port the kernel chose is the one other workers must be told
        worker = _worker_config(config, flow, port)
    try:
        herder = DistributedHerder(worker, registry)
        await asyncio.to_thread(herder.start)
    except ConnectException as exc:
        serving.close()
        raise MirrorError(f"flow {flow}: {exc}") from None
    cluster_id = ClusterId(herder)
    serving.start(build_app(herder, cluster_id, herder.internal_routes(), herder.peers.call,
                            admin=serving.admin_on_api_listeners), build_admin_app(herder, cluster_id))
    host = "127.0.0.1" if own.url.host in ("", "0.0.0.0", "::") else own.url.host
    url = f"{own.url.scheme}://{host}:{port}"
    log.info("mirror: flow %s runs in group %s, REST API on %s", flow, worker.values["group.id"], url)
    tls = worker.rest_tls().client_context() if own.url.tls else None
    return FlowWorker(flow, herder, url, tls, serving)


def _put_config(url: str, name: str, config: dict[str, str], tls: ssl.SSLContext | None = None) -> tuple[int, str]:
    request = urllib.request.Request(f"{url}/connectors/{name}/config", data=json.dumps(config).encode(),
                                     method="PUT", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30, context=tls) as response:
            return response.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError as exc:
        return 0, str(exc)


def ensure_connectors(worker: FlowWorker, wanted: dict[str, dict[str, str]]) -> None:
    """Create or update the flow's connectors through its worker's REST API, which forwards to the group's
    leader; a group still rebalancing answers 409, so this retries for a while."""
    for name, config in wanted.items():
        deadline = time.monotonic() + CONNECTOR_WAIT_S
        while True:
            status, body = _put_config(worker.url, name, config, worker.tls)
            if status in (200, 201):
                break
            if status == 400 or time.monotonic() > deadline:
                raise MirrorError(f"flow {worker.flow}: connector {name}: HTTP {status} {body}")
            time.sleep(0.5)


def run_mirror(config: MirrorMakerConfig) -> int:
    return asyncio.run(_serve(config))


async def _serve(config: MirrorMakerConfig) -> int:
    registry = PluginRegistry.discover()
    workers: list[FlowWorker] = []
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    try:
        for flow in config.flows():
            workers.append(await _start_flow(config, flow, registry))
        for worker in workers:
            await asyncio.to_thread(ensure_connectors, worker, connectors_of(config, worker.flow))
        log.info("mirror: running %s", ", ".join(str(w.flow) for w in workers))
        await stopping.wait()
    finally:
        log.info("mirror: stopping")
        for worker in workers:
            await asyncio.to_thread(worker.herder.shutdown)
        for worker in workers:
            with contextlib.suppress(Exception):
                await worker.serving.stop()
    return 0
