"""`moldau mirror run MM2.properties`: MirrorMaker 2's dedicated mode. One process runs, for every flow the
config enables (and every pair that only emits heartbeats), a distributed Connect worker talking to the flow's
target cluster, in the group `<source>-mm2` with the internal topics `mm2-configs|offsets|status.<source>.internal`
there, and makes sure the flow's connectors exist with the configs the file gives:
MirrorSourceConnector and MirrorCheckpointConnector for an enabled flow, MirrorHeartbeatConnector unless
heartbeats are off.

Started on several machines with the same file, the processes join the same groups and share the work (and
take over a dead process's work), as MirrorMaker 2's do. Each flow's worker serves Connect's REST API, which
workers use to reach the group's leader: on `<flow>.listeners` when given (e.g. `east->west.listeners =
http://0.0.0.0:8083` with `east->west.rest.advertised.host.name`), else on a free port of 127.0.0.1, which is
enough for processes on one machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

import uvicorn

from moldau.connect.distributed.herder import DistributedHerder
from moldau.connect.errors import ConfigException, ConnectException
from moldau.connect.plugins import PluginRegistry
from moldau.connect.rest import build_app
from moldau.connect.worker.standalone import SHUTDOWN_GRACE_S, ClusterId, RestServer, bind_listener
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
    url: str
    server: RestServer
    serving: asyncio.Task[None]


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


def _worker_config(config: MirrorMakerConfig, flow: Flow, host: str, port: int) -> WorkerConfig:
    props = config.worker_config(flow)
    props.setdefault("listeners", f"http://{host}:{port}")
    try:
        return WorkerConfig.parse(props, standalone=False)
    except ConfigException as exc:
        raise MirrorError(f"worker of flow {flow}: {exc}") from None


async def _start_flow(config: MirrorMakerConfig, flow: Flow, registry: PluginRegistry) -> FlowWorker:
    flow_props = config.worker_config(flow)
    if "listeners" in flow_props:
        host, port = WorkerConfig.parse(flow_props, standalone=False).listener()
    else:
        host, port = "127.0.0.1", 0
    listener = bind_listener(host, port)
    port = listener.getsockname()[1]
    worker = _worker_config(config, flow, host, port)
    try:
        herder = DistributedHerder(worker, registry)
        await asyncio.to_thread(herder.start)
    except ConnectException as exc:
        listener.close()
        raise MirrorError(f"flow {flow}: {exc}") from None
    app = build_app(herder, ClusterId(herder), herder.internal_routes(), herder.peers.call)
    server = RestServer(uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False,
                                       lifespan="off", timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
                                       server_header=False))
    serving = asyncio.get_running_loop().create_task(server.serve(sockets=[listener]))
    log.info("mirror: flow %s runs in group %s, REST API on http://%s:%d", flow, worker.values["group.id"], host,
             port)
    return FlowWorker(flow, herder, f"http://127.0.0.1:{port}" if host in ("0.0.0.0", "") else
                      f"http://{host}:{port}", server, serving)


def _put_config(url: str, name: str, config: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(f"{url}/connectors/{name}/config", data=json.dumps(config).encode(),
                                     method="PUT", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
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
            status, body = _put_config(worker.url, name, config)
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
            worker.server.should_exit = True
        for worker in workers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker.serving, SHUTDOWN_GRACE_S + 2)
    return 0
