"""`moldau features`: describe, upgrade and downgrade feature levels, as kafka-features does (KIP-584).

    moldau features describe
    moldau features upgrade --metadata 4.2 | --feature group.version=1 [--feature ...] [--dry-run]
    moldau features downgrade --feature group.version=0 [--unsafe] [--dry-run]

`describe` reads the supported ranges and finalized levels from ApiVersions (v4); `upgrade` and `downgrade`
send UpdateFeatures, which the active controller validates and commits to the metadata log.
"""

from __future__ import annotations

import argparse
from datetime import timedelta

from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.update_features.v1.request import FeatureUpdateKey, UpdateFeaturesRequest
from kio.static.primitive import i8, i16, i32Timedelta

from moldau import __version__
from moldau.cli.common import CliError, add_action
from moldau.cli.output import add_output_option, emit_table
from moldau.cli.raw_request import call, check
from moldau.metadata.features import (
    METADATA_VERSION,
    METADATA_VERSION_LATEST,
    METADATA_VERSION_MIN,
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    release,
)
from moldau.text import ascii_digits

_UPDATE_TIMEOUT = i32Timedelta.parse(timedelta(seconds=60))


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("features", help="describe, upgrade and downgrade feature levels")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_output_option(add_action(actions, "describe", run_describe,
                                 "supported ranges and finalized levels of every feature"))
    for name, handler, text in (("upgrade", run_upgrade, "raise feature levels"),
                                ("downgrade", run_downgrade, "lower feature levels (0 turns a feature off)")):
        action = add_action(actions, name, handler, text)
        action.add_argument("--feature", action="append", default=[], metavar="NAME=LEVEL",
                            help="a feature and its new level; repeat for several")
        action.add_argument("--metadata", metavar="RELEASE", help="metadata.version by release, such as 4.2")
        action.add_argument("--dry-run", action="store_true", help="validate only; change nothing")
    downgrade = actions.choices["downgrade"]
    downgrade.add_argument("--unsafe", action="store_true", help="an unsafe downgrade (metadata may be lost)")


def run_describe(args: argparse.Namespace) -> int:
    response = call(args.bootstrap_server, ApiVersionsRequest(client_software_name="moldau-cli",
                                                              client_software_version=__version__))
    check(response.error_code, None)
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    rows = [(f.name, f.min_version, f.max_version, _level(f.name, finalized.get(f.name, 0)),
             response.finalized_features_epoch)
            for f in sorted(response.supported_features, key=lambda f: f.name)]
    emit_table(args, rows, ["FEATURE", "SUPPORTED_MIN", "SUPPORTED_MAX", "FINALIZED", "EPOCH"])
    return 0


def _level(name: str, level: int) -> str:
    return f"{level} ({release(level)})" if name == METADATA_VERSION and level else str(level)


def run_upgrade(args: argparse.Namespace) -> int:
    return _update(args, UPGRADE, "upgraded")


def run_downgrade(args: argparse.Namespace) -> int:
    return _update(args, UNSAFE_DOWNGRADE if args.unsafe else SAFE_DOWNGRADE, "downgraded")


def _update(args: argparse.Namespace, upgrade_type: int, done: str) -> int:
    levels = _parse(args.feature, args.metadata)
    request = UpdateFeaturesRequest(
        timeout=_UPDATE_TIMEOUT, validate_only=args.dry_run,
        feature_updates=tuple(FeatureUpdateKey(feature=name, max_version_level=i16(level),
                                               upgrade_type=i8(upgrade_type)) for name, level in levels))
    response = call(args.bootstrap_server, request)
    check(response.error_code, response.error_message)
    for name, level in levels:
        verb = f"can be {done}" if args.dry_run else f"was {done}"
        print(f"{name} {verb} to {_level(name, level)}.")
    return 0


def _parse(items: list[str], metadata: str | None) -> list[tuple[str, int]]:
    levels = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not ascii_digits(value.strip()):
            raise CliError(f"--feature takes NAME=LEVEL, not {item!r}")
        levels.append((name.strip(), int(value)))
    if metadata is not None:
        levels.append((METADATA_VERSION, _metadata_level(metadata)))
    if not levels:
        raise CliError("nothing to change: give --feature NAME=LEVEL or --metadata RELEASE")
    return levels


def _metadata_level(text: str) -> int:
    """metadata.version from a release (4.2 is its latest level, 4.2-IV0 exactly that one) or a level."""
    if ascii_digits(text):
        return int(text)
    matches = [level for level in range(METADATA_VERSION_MIN, METADATA_VERSION_LATEST + 1)
               if release(level) == text or release(level).split("-")[0] == text]
    if not matches:
        raise CliError(f"unknown metadata.version release {text!r}")
    return max(matches)
