"""Running `moldau` CLI commands against a broker, as the compatibility tests of the admin tools do."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def moldau(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`moldau ARGS -b BOOTSTRAP`, its output captured; never raises on a failed command."""
    return subprocess.run([sys.executable, "-m", "moldau", *args, "-b", bootstrap], capture_output=True, text=True,
                          cwd=REPO, timeout=60, check=False)


def ok(bootstrap: str, *args: str) -> str:
    """The standard output of a command that must succeed."""
    result = moldau(bootstrap, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def default_sigint() -> None:
    """`preexec_fn` for a command a test interrupts as Ctrl-C would: SIGINT back to its default in the child.

    A shell starts a background job with SIGINT ignored, and an ignored signal stays ignored across exec, so when the
    suite itself runs in the background every command it starts would ignore the test's SIGINT (Python installs its
    KeyboardInterrupt handler only where SIGINT is not ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
