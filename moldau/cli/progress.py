"""Progress bars with rates for the long client commands, on stderr and only when stderr is a terminal.

`moldau produce` from a file, `moldau consume` with `--max-messages`, `moldau partitions reassign --execute` and
`moldau groups reset-offsets --execute` show how far they are and how fast they go (records/s, bytes/s). Scripts
and pipes see none of it: with stderr redirected the bar is off, and it never touches stdout, where the records
and JSON go.

The bars are tqdm's: a small, dependency-free, well-kept library that does the terminal work (redraw rate
limiting, rates, ETA, unit scaling, clearing the line at the end) for any stream.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import IO, Any

from tqdm import tqdm

# How often the bar may redraw: often enough to look live, rarely enough to cost nothing per record.
REFRESH_INTERVAL_S = 0.2


class Progress:
    """One progress bar (or nothing, when `stream` is not a terminal). Use as a context manager."""

    def __init__(self, description: str, total: float | None = None, unit: str = "rec", *,
                 scale_units: bool = False, stream: IO[str] | None = None) -> None:
        """`total` None: an open count with a rate; `scale_units`: 1.2k rec, 3.4MB (for byte counts too)."""
        out = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(out)
        self.done: float = 0
        self._bar: Any = None
        if self.enabled:
            self._bar = tqdm(total=total, desc=description, unit=unit, unit_scale=scale_units, file=out,
                             mininterval=REFRESH_INTERVAL_S, leave=False, dynamic_ncols=True)

    def advance(self, amount: float = 1) -> None:
        self.done += amount
        if self._bar is not None:
            self._bar.update(amount)

    def advance_to(self, done: float) -> None:
        """Move the bar to `done` (never back)."""
        if done > self.done:
            self.advance(done - self.done)

    def note(self, text: str) -> None:
        """A few words after the bar (e.g. how many records so far, when the bar counts bytes)."""
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)

    def close(self) -> None:
        """Erase the bar, so the command's own summary line follows on a clean line."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False
