"""bench/proc_cpu.py: the /proc parsers the multi-core benchmark reads the processes' and machine's CPU time with."""

from __future__ import annotations

import os

import pytest

from bench.proc_cpu import CpuTime, MachineTime, machine_cpu, parse_machine_stat, parse_pid_stat, process_cpu

# A real /proc/PID/stat line, but for a command whose name holds a space and a ")" as a process may name itself:
# utime 250 and stime 40 ticks.
PID_STAT = ("4242 (moldau (node) 1) S 1 4242 4242 0 -1 4194560 12000 0 3 0 250 40 0 0 20 0 5 0 5660009 "
            "3133440 413 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0")

# user nice system idle iowait irq softirq steal guest guest_nice, then the per-core lines.
MACHINE_STAT = """cpu  400 100 200 1000 300 0 50 0 70 0
cpu0 200 50 100 500 150 0 25 0 35 0
cpu1 200 50 100 500 150 0 25 0 35 0
intr 12345
"""


def test_pid_stat_gives_user_and_system_seconds_past_a_name_with_parentheses() -> None:
    assert parse_pid_stat(PID_STAT, 100) == CpuTime(2.5, 0.4)
    assert parse_pid_stat(PID_STAT, 100).total == pytest.approx(2.9)


def test_a_truncated_pid_stat_line_is_refused() -> None:
    with pytest.raises(ValueError, match="not a /proc/PID/stat line"):
        parse_pid_stat("4242 (x) S 1 2 3", 100)


def test_machine_stat_counts_idle_and_iowait_as_not_busy_and_guest_time_once() -> None:
    # busy = user + nice + system + irq + softirq + steal; guest is already inside user and nice.
    assert parse_machine_stat(MACHINE_STAT, 100) == MachineTime(busy=7.5, total=20.5)


def test_machine_stat_without_the_aggregate_line_is_refused() -> None:
    with pytest.raises(ValueError, match="no aggregate cpu line"):
        parse_machine_stat("cpu0 1 2 3 4\n", 100)


def test_differences_give_what_was_used_in_between() -> None:
    assert CpuTime(3.0, 1.0) - CpuTime(1.0, 0.25) == CpuTime(2.0, 0.75)
    assert MachineTime(10.0, 40.0) - MachineTime(4.0, 20.0) == MachineTime(6.0, 20.0)


def test_the_readers_see_this_process_spend_cpu() -> None:
    before, machine_before = process_cpu(os.getpid()), machine_cpu()
    deadline = os.times().elapsed + 0.2
    while os.times().elapsed < deadline:  # busy, so that at least a few clock ticks pass on this process
        sum(range(1000))
    used, machine = process_cpu(os.getpid()) - before, machine_cpu() - machine_before
    assert used.total > 0
    assert 0 < machine.busy <= machine.total + 1e-6  # a fully busy machine has busy == total
