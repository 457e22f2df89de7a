"""`moldau client-metrics`: client metrics subscriptions (KIP-714), like Kafka's kafka-client-metrics, and the
metrics clients pushed.

    moldau client-metrics alter --name producers --metrics org.apache.kafka.producer. --interval-ms 1000 \\
        --match client_software_name=librdkafka
    moldau client-metrics list | describe [--name NAME] | delete --name NAME
    moldau client-metrics clients --url http://127.0.0.1:8080
    moldau client-metrics push-latest --url http://127.0.0.1:8080 (--instance-id ID | --client-id ID)

Subscriptions are CLIENT_METRICS config resources: `alter`, `describe` and `delete` send IncrementalAlterConfigs
and DescribeConfigs, `list` ListConfigResources. Pushed metrics are kept in each broker's memory and read from
its console URL (`console.listeners`, e.g. http://127.0.0.1:8080).
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from typing import Any

from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest
from kio.static.primitive import i8

from moldau.cli.common import REQUEST_TIMEOUT_S, CliError, add_action
from moldau.cli.output import add_output_option, emit, emit_table, wants_json
from moldau.cli.raw_request import call, check
from moldau.cli.table import format_table
from moldau.telemetry.subscriptions import INTERVAL_MS, MATCH, METRICS, RESOURCE_CLIENT_METRICS

OP_SET, OP_DELETE = 0, 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("client-metrics", help="client metrics subscriptions and pushed metrics")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    alter = add_action(actions, "alter", run_alter, "create or change a subscription")
    alter.add_argument("--name", required=True, help="the subscription")
    alter.add_argument("--metrics", help="metric name prefixes, comma-separated; * for every metric")
    alter.add_argument("--interval-ms", type=int, help="how often matching clients push (100-3600000)")
    alter.add_argument("--match", help="selector=regex pairs, comma-separated (client_id, client_software_name, "
                                       "client_software_version, client_instance_id, client_source_address, "
                                       "client_source_port)")
    add_output_option(add_action(actions, "list", run_list, "the subscriptions' names"))
    describe = add_output_option(add_action(actions, "describe", run_describe,
                                            "the subscriptions' metrics, interval and match"))
    describe.add_argument("--name", help="one subscription (default: all)")
    delete = add_action(actions, "delete", run_delete, "remove a subscription")
    delete.add_argument("--name", required=True)
    clients = add_output_option(add_action(actions, "clients", run_clients,
                                           "the client instances that asked for subscriptions"))
    clients.add_argument("--url", required=True, help="a broker's console URL (console.listeners)")
    latest = add_output_option(add_action(actions, "push-latest", run_push_latest,
                                          "the latest metrics a client pushed"))
    latest.add_argument("--url", required=True, help="a broker's console URL (console.listeners)")
    which = latest.add_mutually_exclusive_group(required=True)
    which.add_argument("--instance-id", help="the client instance id")
    which.add_argument("--client-id", help="the client id (its most recent instance)")


def _alter(args: argparse.Namespace, name: str, configs: list[tuple[str, int, str | None]]) -> None:
    resource = AlterConfigsResource(resource_type=i8(RESOURCE_CLIENT_METRICS), resource_name=name, configs=tuple(
        AlterableConfig(name=k, config_operation=i8(op), value=v) for k, op, v in configs))
    response = call(args.bootstrap_server, IncrementalAlterConfigsRequest(resources=(resource,), validate_only=False))
    for result in response.responses:
        check(result.error_code, result.error_message)


def run_alter(args: argparse.Namespace) -> int:
    changes = [(key, OP_SET, value) for key, value in ((METRICS, args.metrics), (MATCH, args.match),
                                                       (INTERVAL_MS, args.interval_ms)) if value is not None]
    if not changes:
        raise CliError("nothing to change: give --metrics, --interval-ms and/or --match")
    _alter(args, args.name, [(k, op, str(v)) for k, op, v in changes])
    print(f"Altered client metrics subscription {args.name}.")
    return 0


def _names(args: argparse.Namespace) -> list[str]:
    response = call(args.bootstrap_server, ListConfigResourcesRequest(resource_types=(i8(RESOURCE_CLIENT_METRICS),)))
    check(response.error_code, None)
    return sorted(r.resource_name for r in response.config_resources)


def run_list(args: argparse.Namespace) -> int:
    names = _names(args)
    emit(args, names, lambda: "\n".join(names))
    return 0


def _describe(args: argparse.Namespace, names: list[str]) -> dict[str, dict[str, str]]:
    resources = tuple(DescribeConfigsResource(resource_type=i8(RESOURCE_CLIENT_METRICS), resource_name=n,
                                              configuration_keys=None) for n in names)
    response = call(args.bootstrap_server, DescribeConfigsRequest(resources=resources))
    out = {}
    for result in response.results:
        check(result.error_code, result.error_message)
        out[result.resource_name] = {c.name: c.value or "" for c in result.configs}
    return out


def run_describe(args: argparse.Namespace) -> int:
    names = [args.name] if args.name else _names(args)
    rows = [(name, c.get(METRICS, ""), c.get(INTERVAL_MS, ""), c.get(MATCH, ""))
            for name, c in (_describe(args, names) if names else {}).items()]
    emit_table(args, rows, ["NAME", "METRICS", "INTERVAL_MS", "MATCH"], empty="no client metrics subscriptions")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    if args.name not in _names(args):
        raise CliError(f"no client metrics subscription {args.name}")
    _alter(args, args.name, [(key, OP_DELETE, None) for key in (METRICS, INTERVAL_MS, MATCH)])
    print(f"Deleted client metrics subscription {args.name}.")
    return 0


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT_S) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as exc:
        raise CliError(f"{url}: HTTP {exc.code} {exc.read().decode(errors='replace')}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise CliError(f"cannot reach {url}: {exc}") from None


def run_clients(args: argparse.Namespace) -> int:
    clients = _get(f"{args.url.rstrip('/')}/v1/client-metrics")
    rows = [(c["client_instance_id"], c["client_id"], c["client_software_name"], c["client_software_version"],
             ",".join(c["requested_metrics"]) or "-", c["pushes"], c["points"]) for c in clients]
    emit(args, clients, lambda: format_table(rows, ["INSTANCE", "CLIENT_ID", "SOFTWARE", "VERSION", "METRICS",
                                                    "PUSHES", "POINTS"]))
    return 0


def run_push_latest(args: argparse.Namespace) -> int:
    base = f"{args.url.rstrip('/')}/v1/client-metrics"
    instance = args.instance_id
    if instance is None:
        known = [c for c in _get(base) if c["client_id"] == args.client_id and c["pushes"]]
        if not known:
            raise CliError(f"no pushed metrics from client id {args.client_id}")
        instance = known[-1]["client_instance_id"]
    latest = _get(f"{base}/{instance}")
    if wants_json(args):
        emit(args, latest, str)
        return 0
    print(f"client instance {latest['client_instance_id']} ({latest['client_id']}, "
          f"{latest['client_software_name']} {latest['client_software_version']}): push {latest['pushes']}, "
          f"{latest['last_push_bytes']} bytes")
    rows = [(m["name"], m["kind"], _number(m["value"]), " ".join(f"{k}={v}" for k, v in m["attributes"].items()))
            for m in latest["metrics"]]
    print(format_table(rows, ["METRIC", "KIND", "VALUE", "ATTRIBUTES"]))
    return 0


def _number(value: float) -> int | float:
    return int(value) if value == int(value) else value
