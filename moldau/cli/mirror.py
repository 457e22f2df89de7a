"""`moldau mirror`: MirrorMaker 2's dedicated mode and tools.

`moldau mirror MM2.properties` (or `moldau mirror run MM2.properties`) runs the flows the file enables, as
MirrorMaker 2's `connect-mirror-maker.sh` does.

`moldau mirror failover MM2.properties --group G` prints the offsets consumer group G should go on from on
the target (translated from its offsets on the source through the checkpoints), and with `--execute` commits
them to the group on the target, so its consumers can be started there.
"""

import argparse
import logging
import sys
from dataclasses import asdict

from moldau.cli.common import CliError
from moldau.cli.output import add_output_option, emit, wants_json
from moldau.config.properties import load_properties
from moldau.mirror.config import MirrorMakerConfig
from moldau.mirror.policy import replication_policy
from moldau.mirror.remote import GroupActive, commit_offsets, translated_offsets


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser("mirror", help="geo-replication tools (MirrorMaker 2's model)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = actions.add_parser("run", help="run the flows a MirrorMaker 2 properties file enables",
                             description="run the flows a MirrorMaker 2 properties file enables (dedicated mode)")
    run.add_argument("config", metavar="MM2.properties")
    run.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    run.set_defaults(func=run_flows)
    status = actions.add_parser("status", help="replication lag per partition and the latest checkpoints",
                                description="replication lag per partition (records and seconds, as of the "
                                            "mirror's last offset commit) and each group's latest checkpoints")
    status.add_argument("config", metavar="MM2.properties")
    status.add_argument("--source", help="the alias of the source cluster (default: every enabled flow)")
    status.add_argument("--target", help="the alias of the target cluster")
    add_output_option(status)
    status.set_defaults(func=run_status)
    text = "print (or commit, with --execute) a consumer group's translated offsets on the target"
    # The clusters and their security settings come from the MirrorMaker 2 properties, not --bootstrap-server.
    failover = actions.add_parser("failover", help=text, description=text)
    failover.set_defaults(func=run_failover)
    failover.add_argument("config", metavar="MM2.properties")
    failover.add_argument("--group", required=True, help="the consumer group to move")
    failover.add_argument("--source", help="the alias of the cluster the group consumed from")
    failover.add_argument("--target", help="the alias of the cluster it moves to")
    failover.add_argument("--execute", action="store_true", help="commit the offsets to the group on the target")


def _config(path: str) -> MirrorMakerConfig:
    try:
        return MirrorMakerConfig(load_properties(path))
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(str(exc)) from None


ACTIONS = ("run", "status", "failover", "-h", "--help")


def with_default_action(argv: list[str]) -> list[str]:
    """`moldau mirror MM2.properties` means `moldau mirror run MM2.properties`, as MirrorMaker 2 is started."""
    if argv[:1] == ["mirror"] and len(argv) > 1 and argv[1] not in ACTIONS:
        return ["mirror", "run", *argv[1:]]
    return argv


def run_flows(args: argparse.Namespace) -> int:
    from moldau.mirror.driver import MirrorError, run_mirror

    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = _config(args.config)
    try:
        return run_mirror(config)
    except MirrorError as exc:
        raise CliError(str(exc)) from None


def run_status(args: argparse.Namespace) -> int:
    from moldau.mirror.status import checkpoints, partition_lags

    config = _config(args.config)
    flows = [f for f in config.flows() if config.enabled(f) and args.source in (None, f.source)
             and args.target in (None, f.target)]
    if not flows:
        raise CliError("no enabled flow matches")
    if wants_json(args):
        emit(args, [{"flow": str(flow), "partitions": [asdict(lag) for lag in partition_lags(config, flow)],
                     "checkpoints": [asdict(c) for c in checkpoints(config, flow)]} for flow in flows], str)
        return 0
    for flow in flows:
        print(f"flow {flow}")
        print("  TOPIC\tPARTITION\tEND\tNEXT-TO-COPY\tLAG-RECORDS\tLAG-SECONDS")
        for lag in partition_lags(config, flow):
            copied = "-" if lag.next_to_copy is None else str(lag.next_to_copy)
            print(f"  {lag.topic}\t{lag.partition}\t{lag.end}\t{copied}\t{lag.records}\t{lag.seconds:.1f}")
        print("  GROUP\tREMOTE-TOPIC\tPARTITION\tUPSTREAM\tDOWNSTREAM")
        for checkpoint in checkpoints(config, flow):
            print(f"  {checkpoint.group}\t{checkpoint.topic}\t{checkpoint.partition}\t{checkpoint.upstream_offset}"
                  f"\t{checkpoint.downstream_offset}")
    return 0


def run_failover(args: argparse.Namespace) -> int:
    config = _config(args.config)
    try:
        flow = config.flow_between(args.source, args.target)
        # The commands report failures themselves; librdkafka's own log lines would only add noise.
        target = {**config.librdkafka(flow.target), "client.id": "moldau-cli", "enable.metrics.push": False,
                  "log_level": 2}
    except ValueError as exc:
        raise CliError(str(exc)) from None
    topic = replication_policy(config.props).checkpoints_topic(flow.source)
    offsets = translated_offsets(target, topic, args.group)
    if not offsets:
        raise CliError(f"no checkpoints of group {args.group} in {topic} on {flow.target}: is the checkpoint "
                       "connector running, and has the group committed offsets of mirrored topics?")
    for (remote, partition), offset in sorted(offsets.items()):
        print(f"{remote}\t{partition}\t{offset}")
    if args.execute:
        try:
            commit_offsets(target, args.group, offsets)
        except GroupActive as exc:
            raise CliError(str(exc)) from None
        print(f"committed {len(offsets)} offsets of group {args.group} on {flow.target}", file=sys.stderr)
    return 0
