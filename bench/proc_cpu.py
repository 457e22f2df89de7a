"""CPU time from Linux's /proc: a process's user and system seconds (/proc/PID/stat) and the whole machine's
busy and total time (/proc/stat), so a benchmark can say how many cores its processes kept busy.

The parsers take the files' text and are pure; ``process_cpu`` and ``machine_cpu`` read the files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# Fields of /proc/PID/stat after the ")" that closes the command name (which may hold spaces and parentheses):
# state is the first, utime the 12th and stime the 13th (fields 14 and 15 of proc(5), counted from 1).
_UTIME, _STIME = 11, 12
# Columns of a /proc/stat "cpu" line that are not busy time: idle and iowait (guest time is already counted
# in user and nice, so it is left out of the total).
_IDLE, _IOWAIT = 3, 4
_COUNTED_COLUMNS = 8  # user nice system idle iowait irq softirq steal


@dataclass(frozen=True, slots=True)
class CpuTime:
    """User and system CPU seconds."""

    user: float
    system: float

    @property
    def total(self) -> float:
        return self.user + self.system

    def __sub__(self, earlier: CpuTime) -> CpuTime:
        return CpuTime(self.user - earlier.user, self.system - earlier.system)


@dataclass(frozen=True, slots=True)
class MachineTime:
    """Seconds of CPU time, summed over every core, that were busy and that passed in all."""

    busy: float
    total: float

    def __sub__(self, earlier: MachineTime) -> MachineTime:
        return MachineTime(self.busy - earlier.busy, self.total - earlier.total)


def parse_pid_stat(text: str, ticks_per_second: int) -> CpuTime:
    """User and system seconds from the text of /proc/PID/stat."""
    fields = text.rpartition(")")[2].split()
    if len(fields) <= _STIME:
        raise ValueError(f"not a /proc/PID/stat line: {text[:80]!r}")
    return CpuTime(int(fields[_UTIME]) / ticks_per_second, int(fields[_STIME]) / ticks_per_second)


def parse_machine_stat(text: str, ticks_per_second: int) -> MachineTime:
    """Busy and total seconds of all cores from the text of /proc/stat (its aggregate "cpu" line)."""
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name == "cpu":
            columns = [int(value) for value in rest.split()[:_COUNTED_COLUMNS]]
            total = sum(columns)
            idle = columns[_IDLE] + (columns[_IOWAIT] if len(columns) > _IOWAIT else 0)
            return MachineTime((total - idle) / ticks_per_second, total / ticks_per_second)
    raise ValueError("/proc/stat has no aggregate cpu line")


def ticks_per_second() -> int:
    return os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> CpuTime:
    """CPU time process ``pid`` has used so far (its threads included, its children not)."""
    with open(f"/proc/{pid}/stat") as stat:
        return parse_pid_stat(stat.read(), ticks_per_second())


def machine_cpu() -> MachineTime:
    """The whole machine's busy and total CPU time so far."""
    with open("/proc/stat") as stat:
        return parse_machine_stat(stat.read(), ticks_per_second())
