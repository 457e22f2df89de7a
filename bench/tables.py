"""The benchmarks' result tables: one row per metric, a column per broker or configuration, a ratio column
comparing the first two and one per raw limit; printed as aligned text and saved as JSON under bench/results/.

Not a benchmark itself; the scenario scripts use it through ``bench.common`` and directly.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "bench" / "results"

Measurements = dict[str, float | None]


@dataclass
class TargetResult:
    """Figures of one broker in one scenario, plus what went wrong."""

    values: Measurements = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def best_rate(values: Measurements) -> float | None:
    """The highest of the MB/s figures in ``values`` (the better load generator or reader), None if there is none."""
    rates = [v for k, v in values.items() if k.endswith("MB/s") and v]
    return max(rates) if rates else None


def size_tables(titles: dict[int, str], results: dict[str, TargetResult], baselines: dict[str, float],
                footnote: str | None = None) -> list[Table]:
    """One table per record size, of the metrics named ``"{size} B ..."``, each with ``footnote`` if given."""
    tables = []
    for size, title in titles.items():
        tables.append(build_table(title, results, baselines, prefix=f"{size} B "))
        tables[-1].notes += [footnote] if footnote else []
    return tables


@dataclass
class Row:
    """One metric measured on every target; ``baseline`` is the raw-limit figure it is compared to."""

    metric: str
    values: dict[str, float | None] = field(default_factory=dict)
    baseline: float | None = None


@dataclass
class Table:
    """One scenario's results."""

    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)  # its own columns, where they are not the brokers measured

    def row(self, metric: str, baseline: float | None = None) -> Row:
        """The row named ``metric``, created on first use."""
        for existing in self.rows:
            if existing.metric == metric:
                return existing
        created = Row(metric, baseline=baseline)
        self.rows.append(created)
        return created


def raw_note(limits: dict[str, float], which: str) -> str:
    """Footnote naming the raw limit that the ``/raw`` columns divide by."""
    name = {"append": "loopback + file append", "discard": "loopback, discard"}[which]
    return f"raw limit ({name}) measured in this run: {limits[which]:,.0f} MB/s"


def build_table(title: str, results: dict[str, TargetResult], baselines: dict[str, float], prefix: str = "") -> Table:
    """A table of the metrics named ``prefix...`` (prefix dropped), in the order first measured."""
    table = Table(title)
    for label, result in results.items():
        for metric, value in result.values.items():
            if metric.startswith(prefix):
                name = metric[len(prefix) :]
                table.row(name, baselines.get(name)).values[label] = value
        table.notes += [f"{label}: {p[len(prefix) :]}" for p in result.problems if p.startswith(prefix)]
    return table


def fmt(value: float | None) -> str:
    """A figure in a table cell."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.2g}"


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either is missing or the denominator is zero."""
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def _header(labels: list[str], with_baseline: bool) -> list[str]:
    header = ["metric", *labels]
    if len(labels) >= 2:
        header.append(f"{labels[0]}/{labels[1]}")
    if with_baseline:
        header += [f"{label}/raw" for label in labels]
    return header


def _cells(row: Row, labels: list[str], with_baseline: bool) -> list[str]:
    values = [row.values.get(label) for label in labels]
    cells = [row.metric, *(fmt(v) for v in values)]
    if len(labels) >= 2:
        cells.append(fmt(ratio(values[0], values[1])))
    if with_baseline:
        cells += [fmt(ratio(v, row.baseline)) if row.baseline else "" for v in values]
    return cells


def _align(cells: list[str], widths: list[int]) -> list[str]:
    return [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]


def render(table: Table, labels: list[str]) -> str:
    """The table as aligned text: a column per label, or per column of its own if it has them."""
    labels = table.columns or labels
    with_baseline = any(row.baseline for row in table.rows)
    grid = [_header(labels, with_baseline)] + [_cells(r, labels, with_baseline) for r in table.rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(grid[0]))]
    lines = ["  ".join(_align(line, widths)) for line in grid]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([f"\n== {table.title}", *lines, *(f"   {n}" for n in table.notes)])


def git_state() -> str:
    """The repository's commit, marked ``+changes`` when the files under moldau/ differ from it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return f"{commit}+changes" if git("status", "--porcelain", "moldau") else commit


def save_results(name: str, labels: list[str], tables: list[Table], extra: dict[str, Any]) -> Path:
    """Write the tables as JSON under ``bench/results/`` and return the file's path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = RESULTS_DIR / f"{name}-{stamp}.json"
    payload = {
        "scenario": name,
        "command": " ".join([Path(sys.executable).name, "-m", f"bench.{name}", *sys.argv[1:]]),
        "finished": dt.datetime.now().isoformat(timespec="seconds"),
        "targets": labels,
        "git": git_state(),
        "tables": [asdict(t) for t in tables],
        **extra,
    }
    path.write_text(json.dumps(payload, indent=2))
    return path


def report(name: str, labels: list[str], tables: list[Table], save: bool, extra: dict[str, Any]) -> None:
    """Print every table and, unless told not to, save them."""
    for table in tables:
        print(render(table, labels), flush=True)
    if save:
        path = save_results(name, labels, tables, extra)
        print(f"\nresults written to {path.relative_to(REPO)}")
