"""The small files beside a partition's segments that say where its data stands.

* `recovery-point`: every byte below this offset was fsynced, so a start after a crash re-validates only
  the segments from the one holding it.
* `log-start-offset`: the first offset clients may read, which DeleteRecords and retention move.
* `high-watermark`: the last high watermark written, where a replicated log resumes after a restart.
* `partition.metadata`: the topic id, in Kafka's text format (`version: 0` / `topic_id: <base64>`).
* `.clean-shutdown`: left by a clean close and consumed by the next open, for a log opened on its own (the log
  manager's logs leave none: the log directory's marker stands for them).

Each offset file holds one decimal number and a newline, replaced atomically. They are kept apart from
`log.py` because they are a file format, with their own failure rules (an unreadable checkpoint reads as
absent), and the leader epoch cache's `leader-epoch-checkpoint` lives in `leader_epoch_cache.py`.
"""

from __future__ import annotations

import base64
import os
import uuid

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.producer_state import fsync_directory, write_atomically

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "HIGH_WATERMARK_FILE",
    "LOG_START_OFFSET_FILE",
    "PARTITION_METADATA_FILE",
    "RECOVERY_POINT_FILE",
    "has_clean_shutdown_marker",
    "kafka_uuid_string",
    "read_offset_checkpoint",
    "read_topic_id",
    "reconcile_topic_id",
    "remove_clean_shutdown_marker",
    "write_clean_shutdown_marker",
    "write_offset_checkpoint",
    "write_offset_checkpoints",
]

CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
RECOVERY_POINT_FILE = "recovery-point"
LOG_START_OFFSET_FILE = "log-start-offset"
HIGH_WATERMARK_FILE = "high-watermark"
PARTITION_METADATA_FILE = "partition.metadata"


def read_offset_checkpoint(directory: str, name: str) -> int | None:
    """The offset in checkpoint `name`; None when it is missing or unreadable (treated as never written)."""
    try:
        with open(os.path.join(directory, name), encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def write_offset_checkpoint(directory: str, name: str, value: int, durable: bool = True) -> None:
    write_atomically(os.path.join(directory, name), f"{value}\n".encode("ascii"), durable)


def write_offset_checkpoints(directory: str, recovery_point: int, log_start_offset: int,
                             high_watermark: int, *, durable: bool = True) -> None:
    """All three offset checkpoints, the recovery point first. Raises OSError. `durable=False` leaves the
    fsyncs to the caller (one sync of the file system for many logs)."""
    write_offset_checkpoint(directory, RECOVERY_POINT_FILE, recovery_point, durable)
    write_offset_checkpoint(directory, LOG_START_OFFSET_FILE, log_start_offset, durable)
    write_offset_checkpoint(directory, HIGH_WATERMARK_FILE, high_watermark, durable)


def has_clean_shutdown_marker(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, CLEAN_SHUTDOWN_FILE))


def remove_clean_shutdown_marker(directory: str, durable: bool = True) -> None:
    """Remove the marker, durably unless the caller's own marker (a log directory's) already makes any crash
    from now on count as unclean."""
    os.unlink(os.path.join(directory, CLEAN_SHUTDOWN_FILE))
    if durable:
        fsync_directory(directory)


def write_clean_shutdown_marker(directory: str, durable: bool = True) -> None:
    # Empty, so there is nothing to tear: created in place, without the temporary file and rename of
    # `write_atomically` (a stop with 10,000 partitions creates 10,000 of them).
    os.close(os.open(os.path.join(directory, CLEAN_SHUTDOWN_FILE), os.O_WRONLY | os.O_CREAT, 0o644))
    if durable:
        fsync_directory(directory)


def reconcile_topic_id(directory: str, topic_id: uuid.UUID | None) -> uuid.UUID | None:
    """The topic id of `partition.metadata`, written when absent; a different id is an error."""
    path = os.path.join(directory, PARTITION_METADATA_FILE)
    stored = _read_partition_metadata(path)
    if stored is None:
        if topic_id is not None:
            text = f"version: 0\ntopic_id: {kafka_uuid_string(topic_id)}\n"
            # Not fsynced: the metadata log holds the topic id durably, and a file lost or torn by a crash
            # reads as absent and is written again on the next open. Two fsyncs per new partition made
            # creating a 1,000-partition topic take seconds.
            write_atomically(path, text.encode("ascii"), durable=False)
        return topic_id
    if topic_id is not None and stored != topic_id:
        raise KafkaError(ErrorCode.inconsistent_topic_id,
                         f"{directory} belongs to topic id {kafka_uuid_string(stored)}")
    return stored


def read_topic_id(directory: str) -> uuid.UUID | None:
    """The topic id of `partition.metadata`; None when it is missing or unreadable."""
    return _read_partition_metadata(os.path.join(directory, PARTITION_METADATA_FILE))


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's textual Uuid: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def _read_partition_metadata(path: str) -> uuid.UUID | None:
    try:
        with open(path, encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        return uuid.UUID(bytes=base64.urlsafe_b64decode(fields["topic_id"].strip() + "=="))
    except (OSError, KeyError, ValueError):
        return None
