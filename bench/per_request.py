"""Per-request cost: synchronous offset commits and one-record produce requests, optionally against a baseline.

The two loads where the broker's own work per request shows, from ``bench.groups`` and ``bench.small``:

- commits/s of WRITERS confluent-kafka processes (1 and 4 by default), each committing ever larger offsets of its
  own partition to one shared group with ``commit(asynchronous=False)``, one after the other;
- requests/s of 3 confluent-kafka producers sending 100 B records one per request (acks=1).

With ``--baseline DIR`` (a checkout of an earlier Moldau commit, its C extensions built or copied in) the target
``moldau-baseline`` is that tree's Moldau, measured in the same rounds as the others: before and after a change
on the same loaded machine, in one run. For example::

    git worktree add ../moldau-base REV && cp moldau/*.so ../moldau-base/moldau/
    python -m bench.per_request --target moldau,tansu,moldau-baseline --baseline ../moldau-base

Run from the repository root:
python -m bench.per_request [--target moldau|tansu|both|...,moldau-baseline] [--baseline DIR] [--quick]
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from bench import common, groups, small
from bench.common import BROKER_COMMANDS, Broker, Case, moldau_command, repeats, run_cases, scenario_main
from bench.tables import Measurements, Table, TargetResult, build_table

BASELINE_KIND = "moldau-baseline"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this scenario."""
    parser.add_argument("--baseline", type=Path, help="a checkout of the Moldau commit to compare against")
    parser.add_argument("--writers", default="1,4", help="committing processes, comma separated counts")
    parser.add_argument("--producers", type=int, default=3, help="producer processes for one-record requests")
    parser.add_argument("--window", type=int, default=10, help="records outstanding per producer at most")
    parser.add_argument("--duration", type=float, help="seconds of load per case (default 5, quick 4)")


def baseline_command(tree: Path) -> list[str]:
    """Run ``python -m moldau`` from ``tree`` instead of this checkout (the working directory stays here)."""
    boot = f"import runpy, sys; sys.path[0] = {str(tree.resolve())!r}; runpy.run_module('moldau', run_name='__main__')"
    return [sys.executable, "-c", boot]


def register_baseline(tree: Path) -> None:
    """Make ``moldau-baseline`` a broker kind: the same command line as Moldau's, with the baseline's code."""
    common.KINDS = (*common.KINDS, BASELINE_KIND)
    BROKER_COMMANDS[BASELINE_KIND] = lambda port, data_dir: [
        *baseline_command(tree), *moldau_command(port, data_dir)[3:],  # past "python -m moldau"
    ]


def commits(broker: Broker, sink: TargetResult, args: argparse.Namespace, writers: int) -> Measurements:
    return groups.commit_rate(broker, sink, args, writers)


def one_record_requests(broker: Broker, sink: TargetResult, args: argparse.Namespace) -> Measurements:
    return small.one_run(broker, sink, args, 100)


def cases(args: argparse.Namespace) -> list[Case]:
    found = [Case(f"commits, {w} writer(s)", partial(commits, args=args, writers=w))
             for w in (int(part) for part in args.writers.split(",") if part.strip())]
    found.append(Case("small requests 100 B", partial(one_record_requests, args=args)))
    return found


def run(args: argparse.Namespace, targets: list[tuple[str, str]], _limits: dict[str, float]) -> list[Table]:
    """Every target in the same rounds; one table."""
    if any(kind == BASELINE_KIND for _, kind in targets) and args.baseline is None:
        raise SystemExit(f"--target {BASELINE_KIND} needs --baseline DIR")
    results = run_cases(targets, cases(args), repeats(args))
    title = f"per-request cost, {small.duration(args):.0f} s per case, median of {repeats(args)}"
    return [build_table(title, results, {})]


def main() -> None:
    # The baseline is a broker kind of its own, known before the shared options parse --target.
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--baseline", type=Path)
    known, _ = parser.parse_known_args()
    if known.baseline is not None:
        register_baseline(known.baseline)
    scenario_main("per_request", __doc__, add_arguments, run)


if __name__ == "__main__":
    main()
