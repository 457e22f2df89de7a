"""Every benchmark in one run: raw limit, produce, consume, latency, small requests, consumer groups, the
raw-protocol driver (broker capacity without a client library) and N nodes on one host against one
(multicore), one after another.

Measures the raw limit (bench/rawlimit.py) once, then runs each scenario script's measurements with
the same --target, --quick, --repeat and --sizes and each scenario's own defaults, printing each scenario's
tables as it finishes and writing them all to one JSON file under bench/results/. Scenarios never run
in parallel; each starts its brokers afresh and stops them before the next begins.

Run from the repository root:  python -m bench.run_all [--target moldau|tansu|both] [--quick]
    [--only produce,consume,latency,small,groups,raw,multicore]
A --quick run takes a few minutes in all; the default run about ten minutes per broker.
"""

from __future__ import annotations

import argparse
from types import ModuleType
from typing import Any

from bench import consume, groups, latency, multicore, produce, raw_driver, small
from bench.common import base_parser, baseline_limits, kcat_version, note, parse_targets
from bench.tables import Table, render, save_results

SCENARIOS: dict[str, ModuleType] = {"produce": produce, "consume": consume, "latency": latency, "small": small}
SCENARIOS["groups"] = groups
SCENARIOS["raw"] = raw_driver
SCENARIOS["multicore"] = multicore  # Moldau only: skipped when --target has no moldau


def scenario_args(module: ModuleType, args: argparse.Namespace) -> argparse.Namespace:
    """The scenario's own options at their defaults, with the shared ones taken from ``args``."""
    parser = base_parser(module.__doc__)
    module.add_arguments(parser)
    argv = ["--target", args.target, "--sizes", args.sizes, *(["--quick"] if args.quick else [])]
    if args.repeat:
        argv += ["--repeat", str(args.repeat)]
    return parser.parse_args(argv)


def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--only", default=",".join(SCENARIOS), help="scenarios to run, comma separated")
    args = parser.parse_args()
    targets = parse_targets(args.target)
    labels = [label for label, _ in targets]
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SCENARIOS]
    if unknown:
        raise SystemExit(f"--only: unknown scenario {unknown}; choose from {', '.join(SCENARIOS)}")
    limits = baseline_limits(args.quick)
    print(f"raw limit: loopback discard {limits['discard']:,.0f} MB/s, file append {limits['append']:,.0f} MB/s")
    tables: list[Table] = []
    for name in chosen:
        note(f"scenario {name}")
        for table in SCENARIOS[name].run(scenario_args(SCENARIOS[name], args), targets, limits):
            print(render(table, labels), flush=True)
            tables.append(table)
    if not args.no_save:
        extra: dict[str, Any] = {"raw_limit_mb_s": limits, "kcat": kcat_version(), "scenarios": chosen}
        print(f"\nresults written to {save_results('run_all', labels, tables, extra)}")


if __name__ == "__main__":
    main()
