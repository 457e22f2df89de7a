"""`moldau connect`: run a Connect worker (standalone or distributed), and manage connectors through a worker's REST API
(Kafka Connect's) at `--url` (default: $MOLDAU_CONNECT_URL, else http://127.0.0.1:8083)."""

import argparse
import json
import logging
import os
from pathlib import Path
from typing import Any

from moldau.cli.common import CliError, add_action
from moldau.cli.output import add_output_option, emit
from moldau.connect.rest_client import DEFAULT_URL, ConnectApiError, ConnectClient, tls_context

URL_ENV = "MOLDAU_CONNECT_URL"


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `connect` and its subcommands to the top-level parser."""
    parser = subparsers.add_parser("connect", help="run a Connect worker and manage connectors")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    standalone = add_action(actions, "standalone", run_standalone,
                            "run a standalone worker with connectors from files (.properties or .json)")
    standalone.add_argument("worker_config", metavar="WORKER.properties")
    standalone.add_argument("connectors", nargs="*", metavar="CONNECTOR", help=".properties or .json files")
    standalone.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))

    distributed = add_action(actions, "distributed", run_distributed,
                             "run a worker of a distributed Connect cluster (configs, offsets, statuses in topics)")
    distributed.add_argument("worker_config", metavar="WORKER.properties")
    distributed.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))

    _client(add_output_option(add_action(actions, "list", run_list, "list connectors (with their states)")))
    create = _client(add_action(actions, "create", run_create, "create a connector from a .properties/.json file"))
    create.add_argument("file", metavar="FILE")
    for name, handler, text in (("describe", run_describe, "print a connector's config and tasks"),
                                ("status", run_status, "print a connector's and its tasks' states"),
                                ("pause", run_pause, "pause a connector's tasks"),
                                ("resume", run_resume, "resume a paused or stopped connector"),
                                ("stop", run_stop, "stop a connector (its tasks are shut down)"),
                                ("delete", run_delete, "delete a connector")):
        parser = _client(add_action(actions, name, handler, text))
        if name in ("describe", "status"):  # printed as the REST API's JSON either way
            add_output_option(parser)
        parser.add_argument("name", metavar="NAME")
    restart = _client(add_action(actions, "restart", run_restart, "restart a connector (or one task)"))
    restart.add_argument("name", metavar="NAME")
    restart.add_argument("--task", type=int, metavar="ID", help="restart only this task")
    restart.add_argument("--include-tasks", action="store_true", help="restart the tasks too")
    restart.add_argument("--only-failed", action="store_true", help="restart only what has failed")
    _client(add_output_option(add_action(actions, "plugins", run_plugins, "list the connector plugins the worker has")))


def _client(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--url", default=os.environ.get(URL_ENV, DEFAULT_URL),
                        help=f"the worker's REST API (default: ${URL_ENV}, else {DEFAULT_URL})")
    parser.add_argument("--cacert", metavar="FILE",
                        help="https: trust the CAs of this PEM file (default: the system's)")
    parser.add_argument("--cert", metavar="FILE",
                        help="https: offer this PEM client certificate (with its key, or see --key)")
    parser.add_argument("--key", metavar="FILE", help="https: the client certificate's PEM key, if not in --cert")
    return parser


def _call(args: argparse.Namespace, method: str, path: str, body: Any = None, **query: Any) -> Any:
    try:
        tls = tls_context(args.cacert, args.cert, args.key)
        return ConnectClient(args.url, tls=tls).request(method, path, body, **query)
    except ConnectApiError as exc:
        raise CliError(str(exc)) from None


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=False))


def _path(name: str) -> str:
    from urllib.parse import quote
    return "/connectors/" + quote(name, safe="")


def run_standalone(args: argparse.Namespace) -> int:
    from moldau.connect.worker.standalone import StandaloneError
    from moldau.connect.worker.standalone import run_standalone as run

    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return run(args.worker_config, args.connectors)
    except StandaloneError as exc:
        raise CliError(str(exc)) from None


def run_distributed(args: argparse.Namespace) -> int:
    from moldau.connect.distributed.worker import DistributedError
    from moldau.connect.distributed.worker import run_distributed as run

    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return run(args.worker_config)
    except DistributedError as exc:
        raise CliError(str(exc)) from None


def run_list(args: argparse.Namespace) -> int:
    answer = _call(args, "GET", "/connectors", expand="status")
    lines = []
    for name, entry in sorted(answer.items()):
        status = entry["status"]
        tasks = ", ".join(f"{t['id']}:{t['state']}" for t in status["tasks"]) or "-"
        lines.append(f"{name}\t{status['type']}\t{status['connector']['state']}\ttasks {tasks}")
    emit(args, answer, lambda: "\n".join(lines))
    return 0


def run_create(args: argparse.Namespace) -> int:
    from moldau.connect.worker.worker_config import NAME, load_connector_file

    try:
        config = load_connector_file(Path(args.file))
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read {args.file}: {exc}") from None
    if not config.get(NAME):
        raise CliError(f"{args.file}: the connector config has no name")
    _print(_call(args, "POST", "/connectors", {"name": config[NAME], "config": config}))
    return 0


def run_describe(args: argparse.Namespace) -> int:
    _print(_call(args, "GET", _path(args.name)))
    return 0


def run_status(args: argparse.Namespace) -> int:
    _print(_call(args, "GET", _path(args.name) + "/status"))
    return 0


def run_pause(args: argparse.Namespace) -> int:
    _call(args, "PUT", _path(args.name) + "/pause")
    return 0


def run_resume(args: argparse.Namespace) -> int:
    _call(args, "PUT", _path(args.name) + "/resume")
    return 0


def run_stop(args: argparse.Namespace) -> int:
    _call(args, "PUT", _path(args.name) + "/stop")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    _call(args, "DELETE", _path(args.name))
    return 0


def run_restart(args: argparse.Namespace) -> int:
    if args.task is not None:
        _call(args, "POST", f"{_path(args.name)}/tasks/{args.task}/restart")
        return 0
    answer = _call(args, "POST", _path(args.name) + "/restart", includeTasks=args.include_tasks,
                   onlyFailed=args.only_failed)
    if answer is not None:
        _print(answer)
    return 0


def run_plugins(args: argparse.Namespace) -> int:
    plugins = _call(args, "GET", "/connector-plugins")
    emit(args, plugins, lambda: "\n".join(f"{p['class']}\t{p['type']}\t{p['version']}" for p in plugins))
    return 0
