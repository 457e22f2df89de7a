"""The offset checkpoint files of a whole log directory, in Kafka's format, that let a start skip every partition's
own files after a clean shutdown.

Three files sit beside the partition directories, one line per partition:

* `recovery-point-offset-checkpoint`: each log's recovery point, which a clean close moves to its log end offset;
* `log-start-offset-checkpoint`: each log's log start offset;
* `replication-offset-checkpoint`: each log's high watermark.

The format is Kafka's `OffsetCheckpointFile`: a version line (`0`), a count line, then `<topic> <partition>
<offset>` per partition, replaced atomically. The log manager writes them when it closes the directory cleanly,
before its clean-shutdown marker, and trusts them only while that marker is there: they are not kept up to date
while the broker runs (each partition's own checkpoint files are, see `checkpoints`), so after a crash they may be
stale and are ignored. A file that is missing, unreadable or in another version reads as absent, which means
"open every partition from its own files".
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from moldau.storage.producer_state import write_atomically

__all__ = [
    "HIGH_WATERMARK_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "LogDirOffsets",
    "read_log_dir_offsets",
    "write_log_dir_offsets",
]

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
_VERSION = 0

TopicPartition = tuple[str, int]
# Per partition: (log start offset, recovery point, high watermark).
LogDirOffsets = dict[TopicPartition, tuple[int, int, int]]


def write_log_dir_offsets(log_dir: str, offsets: Mapping[TopicPartition, tuple[int, int, int]],
                          durable: bool = False) -> None:
    """Write the three files for `offsets` (log start, recovery point, high watermark per partition). Not fsynced
    unless `durable`: the caller syncs the file system once before its clean-shutdown marker. Raises OSError."""
    keys = sorted(offsets)
    for name, column in ((LOG_START_OFFSET_CHECKPOINT, 0), (HIGH_WATERMARK_CHECKPOINT, 2),
                         (RECOVERY_POINT_CHECKPOINT, 1)):
        lines = [str(_VERSION), str(len(keys))]
        lines += [f"{topic} {partition} {offsets[(topic, partition)][column]}" for topic, partition in keys]
        write_atomically(os.path.join(log_dir, name), ("\n".join(lines) + "\n").encode("utf-8"), durable)


def read_log_dir_offsets(log_dir: str) -> LogDirOffsets:
    """The offsets of every partition named in all three files; empty when any of them is missing or unreadable."""
    columns = [_read(os.path.join(log_dir, name))
               for name in (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, HIGH_WATERMARK_CHECKPOINT)]
    starts, recovery_points, high_watermarks = columns
    if starts is None or recovery_points is None or high_watermarks is None:
        return {}
    return {key: (start, recovery_points[key], high_watermarks[key]) for key, start in starts.items()
            if key in recovery_points and key in high_watermarks}


def _read(path: str) -> dict[TopicPartition, int] | None:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("%s cannot be read (%s): every partition opens from its own files", path, exc)
        return None
    try:
        if len(lines) < 2 or int(lines[0]) != _VERSION or int(lines[1]) != len(lines) - 2:
            raise ValueError("bad version or count")
        entries: dict[TopicPartition, int] = {}
        for line in lines[2:]:
            topic, partition, offset = line.split(" ")
            entries[(topic, int(partition))] = int(offset)
        return entries
    except ValueError as exc:
        log.warning("%s is malformed (%s): every partition opens from its own files", path, exc)
        return None
