"""How long Moldau's processes take to start and to stop, against the interpreter starting with nothing to do.

Every case is a fresh process, run `--runs` times with the cases taken in turn, so that a machine slowing down
slows them all alike; the table gives the median wall time and its ratio to the baseline measured in the same run
(`python -c pass`):

- the CLI building its parser for a command (`--help`, so no broker is needed): what every command, Connect worker
  and mirror process pays before it does anything;
- importing the broker (`moldau.server.broker`);
- a broker's start, from the process's creation to its "listening" line (a new data dir, its schema registry and
  console on), and its clean stop, from SIGTERM to the process's exit.

As `python -m moldau` does, the cases keep Hypothesis from loading (kio registers strategies for its types when it
can import it, as in the test environment).

Run from the repository root:
    python -m bench.startup [--runs 7]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial

from moldau.net.ports import free_ports

NO_HYPOTHESIS = "import sys; sys.modules['hypothesis'] = None; "
COMMANDS = ("topics list", "configs describe", "groups list", "quotas alter")


def timed(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def broker_start_and_stop() -> tuple[float, float]:
    """(seconds to the "listening" line, seconds from SIGTERM to exit) of one new broker."""
    port, registry, console = free_ports(3)
    with tempfile.TemporaryDirectory() as data:
        overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": data, "node.id": "1",
                     "schema.registry.listeners": f"http://127.0.0.1:{registry}",
                     "console.listeners": f"http://127.0.0.1:{console}"}
        args = [sys.executable, "-m", "moldau", "server"]
        for key, value in overrides.items():
            args += ["--override", f"{key}={value}"]
        started = time.perf_counter()
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("moldau: listening on"):
                    break
            else:
                raise RuntimeError(f"the broker exited with {proc.wait()} before listening")
            listening = time.perf_counter() - started
            time.sleep(0.5)  # serving, idle
            stopping = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            return listening, time.perf_counter() - stopping
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def measure(runs: int) -> dict[str, float]:
    """The median seconds of every case."""
    python = [sys.executable, "-c"]
    cases: dict[str, Callable[[], float]] = {"python -c pass": lambda: timed([*python, "pass"])}
    for command in COMMANDS:
        code = (NO_HYPOTHESIS + "from moldau.cli.main import main; "
                f"sys.argv = ['moldau', *{command.split()!r}, '--help']; main()")
        cases[f"moldau {command} --help"] = partial(timed, [*python, code])
    cases["import moldau.server.broker"] = lambda: timed([*python, NO_HYPOTHESIS + "import moldau.server.broker"])
    figures: dict[str, list[float]] = {name: [] for name in [*cases, "broker start to listening", "broker stop"]}
    for _ in range(runs):
        for name, case in cases.items():
            figures[name].append(case())
        listening, stopped = broker_start_and_stop()
        figures["broker start to listening"].append(listening)
        figures["broker stop"].append(stopped)
    return {name: statistics.median(values) for name, values in figures.items()}


def render(medians: dict[str, float], runs: int) -> str:
    baseline = medians["python -c pass"]
    width = max(map(len, medians))
    lines = [f"== Process start and stop, median of {runs} runs", f"{'case':{width}}  seconds  /python -c pass"]
    lines += [f"{name:{width}}  {seconds:7.3f}  {seconds / baseline:15.1f}" for name, seconds in medians.items()]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="runs of every case, the median reported")
    runs = parser.parse_args().runs
    print(render(measure(runs), runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
