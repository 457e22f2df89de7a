"""Writing one log's offset checkpoints (`recovery-point`, `log-start-offset`, `high-watermark`), on the event loop
or on the storage worker thread.

The periodic pass that moves the recovery point past rolled segments, and retention as it deletes them, write these
files often. Each durable write is a temporary file, an fsync, a rename and an fsync of the directory; behind a
file system journal busy freeing gigabytes of deleted blocks, each of those calls waited 3-15 ms on the event loop,
holding every client up (docs/benchmarks.md). `write_later` hands the writing to the worker thread that already
fsyncs rolled segments (`drop_behind.call_later`), after the fsyncs handed to it before.

A job writes the values the log holds when it runs, not when it was queued: a job that runs late writes values as
new as any later one would, and one queued job stands for any number of requests. The recovery point a log holds
is always durable (it moves only past fsynced segments), so whatever the job reads may be written. A file that lags
the log is safe: recovery starts from an older point and does more work.

Producer snapshots older than the one recovery would start from are deleted by the same job, once the file holds
the recovery point that lets them go; each unlink, too, waited up to 13 ms for the journal on the loop.

`write_now` writes at once, for the callers whose correctness needs the file before they go on: a truncation that
lowers the recovery point (new bytes below the old one would otherwise escape recovery after a crash), DeleteRecords,
a close. One lock per log keeps the two from interleaving, so a job that read the values before a truncation
lowered the recovery point cannot rename its file after the truncation's. The loop waits on that lock only when the
worker is writing this very log's files at that moment.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from moldau.storage import checkpoints
from moldau.storage.checkpoints import LOG_START_OFFSET_FILE
from moldau.storage.drop_behind import call_later

__all__ = ["CheckpointWriter", "Offsets"]

# (recovery point, log start offset, high watermark); None where unknown (a file that was missing at load).
Offsets = tuple[int | None, int | None, int | None]


class CheckpointWriter:
    """The offset checkpoint files of the log in `directory`; `current` reads the log's values (on either thread)."""

    def __init__(self, directory: str, current: Callable[[], tuple[int, int, int]],
                 delete_snapshots_before: Callable[[int], None]) -> None:
        self.directory = directory
        self._current = current
        self._delete_snapshots_before = delete_snapshots_before
        # (recovery point, base offset): once the file holds that recovery point, the producer snapshots before
        # that base offset may go (recovery starts from the newest one at or below it).
        self._snapshots_to_delete: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._written: Offsets | None = None  # what the files hold, if known
        self._queued = False
        self._retired = False
        self._error: OSError | None = None

    def assume_written(self, offsets: Offsets | None) -> None:
        """What loading found in the files (or None: unknown), so that unchanged values are not written again."""
        with self._lock:
            self._written = offsets

    def write_now(self, durable: bool = True) -> None:
        """Write the log's current values unless the files hold them. Raises OSError. `durable=False` leaves the
        fsyncs to the caller (one sync of the file system for many logs)."""
        with self._lock:
            self._write(durable)

    def write_log_start_now(self) -> None:
        """Write `log-start-offset` alone, durably (DeleteRecords). Raises OSError."""
        with self._lock:
            self._written = None  # the three files no longer hold one state
            checkpoints.write_offset_checkpoint(self.directory, LOG_START_OFFSET_FILE, self._current()[1])

    def write_later(self, snapshots_before: tuple[int, int] | None = None) -> None:
        """Have the worker thread write the log's values as they are when it runs, durably. With a job already
        queued, that one does. With the worker too far behind, written now. `snapshots_before` (recovery point,
        base offset): delete the producer snapshots before that base offset once the file holds that recovery
        point. Raises OSError only when written now; a failure on the worker is raised by `raise_failure`."""
        if snapshots_before is not None:
            pending = self._snapshots_to_delete
            if pending is None or snapshots_before[0] > pending[0]:
                self._snapshots_to_delete = snapshots_before
        if self._queued or self._retired:
            return
        self._queued = True
        if not call_later(self._run):
            self._queued = False
            with self._lock:
                self._write_and_delete_snapshots()

    def raise_failure(self) -> None:
        """Raise the OSError a worker's write met, once."""
        error, self._error = self._error, None
        if error is not None:
            raise error

    def move(self, directory: str, rename: Callable[[], None]) -> None:
        """Follow the log to `directory`: `rename` moves the files (and tells the producer state), with no job's
        write or deletion in between."""
        with self._lock:
            rename()
            self.directory = directory

    def retire(self) -> None:
        """The log is closed or deleted: a job still queued writes nothing."""
        with self._lock:
            self._retired = True

    def _run(self) -> None:
        """The worker's job."""
        with self._lock:
            self._queued = False  # a request from now on needs a job of its own: this one may have read already
            if self._retired:
                return
            try:
                self._write_and_delete_snapshots()
            except OSError as exc:
                self._error = exc

    def _write_and_delete_snapshots(self) -> None:
        """A job's work, under the lock: write the values durably, then delete the snapshots they let go."""
        self._write(durable=True)
        self._delete_snapshots()

    def _delete_snapshots(self) -> None:
        """Delete the snapshots asked for, if the file now holds the recovery point that allows it."""
        pending, written = self._snapshots_to_delete, self._written
        if pending is None or written is None or written[0] is None or written[0] < pending[0]:
            return
        self._delete_snapshots_before(pending[1])
        if self._snapshots_to_delete is pending:  # else the loop asked for more meanwhile: the next job does it
            self._snapshots_to_delete = None

    def _write(self, durable: bool) -> None:
        values = self._current()
        if values == self._written:
            return
        self._written = None  # unknown until all three are written
        checkpoints.write_offset_checkpoints(self.directory, *values, durable=durable)
        self._written = values
