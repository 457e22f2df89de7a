"""How long a failed log directory may go unreported to the controller (log.dir.failure.timeout.ms, KIP-858)."""

from __future__ import annotations

from moldau.server.dir_failure_reports import DirFailureReports


def test_a_directory_is_overdue_once_unreported_for_the_timeout_from_when_it_was_first_seen() -> None:
    reports = DirFailureReports(timeout_ms=30_000)
    reports.seen_offline(["dir-a"], now_ms=1_000)
    reports.seen_offline(["dir-a", "dir-b"], now_ms=20_000)  # seeing it again does not restart its clock
    assert reports.overdue(30_999) == []
    assert reports.overdue(31_000) == ["dir-a"]
    assert reports.overdue(50_000) == ["dir-a", "dir-b"]


def test_a_directory_told_to_the_controller_is_never_overdue_again() -> None:
    reports = DirFailureReports(timeout_ms=1_000)
    reports.seen_offline(["dir-a", "dir-b"], now_ms=0)
    reports.told(["dir-a"])
    reports.seen_offline(["dir-a", "dir-b"], now_ms=500)  # every heartbeat names it again
    assert reports.overdue(10_000) == ["dir-b"]
    reports.told(["dir-b"])
    assert reports.overdue(10_000) == []
