"""`moldau mirror`: MirrorMaker 2's tools for clusters mirrored with Moldau's mirror connectors.

`moldau mirror failover MM2.properties --group G` prints the offsets consumer group G should go on from on
the target (translated from its offsets on the source through the checkpoints), and with `--execute` commits
them to the group on the target, so its consumers can be started there.
"""

import argparse
import sys

from moldau.cli.common import CliError
from moldau.config.properties import load_properties
from moldau.mirror.config import MirrorMakerConfig
from moldau.mirror.policy import replication_policy
from moldau.mirror.remote import GroupActive, commit_offsets, translated_offsets


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser("mirror", help="geo-replication tools (MirrorMaker 2's model)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
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
