"""Running `moldau` CLI commands against a broker, as the compatibility tests of the admin tools do."""

from __future__ import annotations

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
