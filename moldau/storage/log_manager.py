"""All partition logs of a broker, spread over one or more log directories.

Each log directory holds `<topic>-<partition>` directories and a `.moldau_cleanshutdown` marker that
exists only between a clean `close()` and the next start (construction). Without it every partition of that
directory is opened as after a crash (recovery from its recovery point). Directories named
`*-delete` are deletions interrupted by a crash and are removed at start.

Invariants: one `PartitionLog` per (topic, partition); a new partition goes to the directory holding
the fewest partitions. The manager shares one `DeferredCloser` among its logs and runs it from its
periodic methods, so fds of deleted segments stay valid for `file_delete_delay_ms`. It owns the
`LogCleaner` (compaction runs on its own thread; `run_cleaner` applies and schedules it) and stops it
before closing the logs. Not thread-safe.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from moldau.clock import Clock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.cleaner import DEFAULT_DEDUPE_BUFFER_BYTES, LogCleaner
from moldau.storage.log import PartitionLog, parse_partition_dir_name
from moldau.storage.log_config import LogConfig
from moldau.storage.maintenance_schedule import MaintenanceSchedule
from moldau.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    fsync_directory,
    sync_file_system,
    write_atomically,
)
from moldau.storage.segment import DeferredCloser

__all__ = ["CLEAN_SHUTDOWN_MARKER", "LogDirDescription", "LogManager", "PartitionDescription"]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_MARKER = ".moldau_cleanshutdown"
# Present once every batch in the log directory has had its records walked (logs written by a Moldau that did
# not validate records get one full scan on the first start of a version that does).
RECORDS_VALIDATED_MARKER = ".moldau_records_validated"
_DELETE_SUFFIX = "-delete"


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One partition of a log directory, as DescribeLogDirs reports it."""

    topic: str
    partition: int
    size_bytes: int
    offset_lag: int
    is_future_key: bool = False


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log directory for DescribeLogDirs; `error` is NONE unless the directory is unusable."""

    path: str
    error: ErrorCode
    partitions: tuple[PartitionDescription, ...]
    total_bytes: int
    usable_bytes: int


class LogManager:
    """Opens, creates, deletes and maintains the partition logs of this broker."""

    def __init__(
        self, log_dirs: list[str], clock: Clock, default_config: LogConfig, *,
        topic_configs: Mapping[str, LogConfig] | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        cleaner_dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES,
    ) -> None:
        """Open every partition found in `log_dirs` (with `topic_configs` where given, else the default
        config until `create`/`update_config` supplies the topic's own)."""
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._clock = clock
        self._closer = DeferredCloser(default_config.file_delete_delay_ms)
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._log_dir_of: dict[tuple[str, int], str] = {}
        self._count_in_dir: Counter[str] = Counter()  # logs per directory, so a new one is placed in O(dirs)
        self._schedule = MaintenanceSchedule()  # which logs the periodic roll-and-flush pass must visit
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self.cleaner = LogCleaner(clock, self.logs, dedupe_buffer_bytes=cleaner_dedupe_buffer_bytes)
        self._start()

    # -- life cycle ----------------------------------------------------------------------------------

    def _start(self) -> None:
        for log_dir in self.log_dirs:
            os.makedirs(log_dir, exist_ok=True)
            marker = os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER)
            clean = os.path.exists(marker)
            validated = os.path.exists(os.path.join(log_dir, RECORDS_VALIDATED_MARKER))
            started = time.monotonic()
            opened = self._open_dir(log_dir, clean, recover_all=not validated)
            log.info("opened %d partition logs in %s in %.0f ms (%s)", opened, log_dir,
                     (time.monotonic() - started) * 1000,
                     "first start with record validation: every record re-validated" if not validated else
                     "clean shutdown, no recovery" if clean else "after an unclean shutdown: tails re-validated")
            if not validated:
                self._mark_records_validated(log_dir)
            if clean:
                os.unlink(marker)
                fsync_directory(log_dir)

    @staticmethod
    def _mark_records_validated(log_dir: str) -> None:
        """Every batch in `log_dir` has had its records walked: later starts need not do it again."""
        try:
            with open(os.path.join(log_dir, RECORDS_VALIDATED_MARKER), "w") as marker:
                marker.write("Every record batch here was validated record by record.\n")
            fsync_directory(log_dir)
        except OSError as exc:  # a full disk: the next start validates again
            log.warning("%s: cannot write %s: %s", log_dir, RECORDS_VALIDATED_MARKER, exc)

    def _open_dir(self, log_dir: str, clean: bool, recover_all: bool = False) -> int:
        opened = 0
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(_DELETE_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            parsed = parse_partition_dir_name(name)
            if parsed is None:
                continue
            self._logs[parsed] = PartitionLog.open(
                path, self._config_for(parsed[0]), self._clock, None,
                clean_shutdown=None if clean else False,
                producer_id_expiration_ms=self.producer_id_expiration_ms, closer=self._closer,
                recover_all=recover_all, log_dir_marker=True,
            )
            self._log_dir_of[parsed] = log_dir
            self._count_in_dir[log_dir] += 1
            self._follow(self._logs[parsed])
            opened += 1
        return opened

    def close(self) -> None:
        """Close every log, then mark clean each log directory whose logs all closed cleanly."""
        self.cleaner.stop()
        failed_dirs = set()
        for key, partition_log in self._logs.items():
            try:
                partition_log.close()
            except KafkaError as e:
                log.error("closing %s-%d failed: %s", *key, e.message)
                failed_dirs.add(self._log_dir_of[key])
        self._closer.close_all()
        for log_dir in self.log_dirs:
            if log_dir in failed_dirs:
                continue
            try:
                # What the logs wrote at close without fsyncs (checkpoints, snapshots, their markers) is durable
                # before the directory's marker says that they closed cleanly.
                sync_file_system(log_dir)
                write_atomically(os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER), b"")
            except OSError as e:
                log.error("%s not marked clean, the next start recovers it: %s", log_dir, e)
        self._logs.clear()
        self._log_dir_of.clear()
        self._count_in_dir.clear()
        self._schedule = MaintenanceSchedule()

    # -- partitions ----------------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def partitions(self) -> list[tuple[str, int]]:
        """(topic, partition) of every open log."""
        return list(self._logs)

    def logs(self) -> Mapping[tuple[str, int], PartitionLog]:
        return self._logs

    def create(
        self, topic: str, partition: int, topic_id: uuid.UUID | None, config: LogConfig | None = None
    ) -> PartitionLog:
        """The partition's log, created in the least loaded directory if it does not exist yet; an existing
        log takes `config` when given."""
        key = (topic, partition)
        if config is not None:
            self._topic_configs[topic] = config
        existing = self._logs.get(key)
        if existing is not None:
            if topic_id is not None and existing.topic_id not in (None, topic_id):
                raise KafkaError(ErrorCode.inconsistent_topic_id, f"{topic}-{partition} has another topic id")
            if config is not None:
                existing.config = config
            return existing
        log_dir = min(self.log_dirs, key=lambda d: (self._partition_count(d), self.log_dirs.index(d)))
        try:
            created = PartitionLog.open(
                os.path.join(log_dir, f"{topic}-{partition}"), self._config_for(topic), self._clock,
                topic_id, producer_id_expiration_ms=self.producer_id_expiration_ms, closer=self._closer,
                log_dir_marker=True,
            )
        except OSError as e:
            raise KafkaError(ErrorCode.kafka_storage_error, f"cannot create {topic}-{partition}: {e}") from e
        self._logs[key] = created
        self._log_dir_of[key] = log_dir
        self._count_in_dir[log_dir] += 1
        self._follow(created)
        return created

    def _follow(self, partition_log: PartitionLog) -> None:
        """Put a log opened or created here on the maintenance schedule, and keep it there as it is written."""
        partition_log.on_write = self._schedule.touch
        self._schedule.touch(partition_log)

    def delete(self, topic: str, partition: int) -> bool:
        """Delete a partition's log: rename its directory to `*.<hex>-delete` (atomic, so a crash leaves
        it for the next start to remove), then remove it. Returns False if there was no such log."""
        key = (topic, partition)
        doomed_log = self._logs.pop(key, None)
        doomed_dir = self._log_dir_of.pop(key, None)
        if doomed_dir is not None:
            self._count_in_dir[doomed_dir] -= 1
        if doomed_log is None:
            return False
        self._schedule.forget(doomed_log)
        doomed_log.on_write = None
        parent = os.path.dirname(doomed_log.directory)
        doomed = os.path.join(parent, f"{topic}-{partition}.{uuid.uuid4().hex}{_DELETE_SUFFIX}")
        try:
            doomed_log.rename_directory(doomed)
            fsync_directory(parent)
        except OSError as e:
            raise KafkaError(ErrorCode.kafka_storage_error, f"cannot delete {topic}-{partition}: {e}") from e
        doomed_log.delete()
        return True

    def update_config(self, topic: str, config: LogConfig) -> None:
        self._topic_configs[topic] = config
        for (log_topic, _), partition_log in self._logs.items():
            if log_topic == topic:
                partition_log.config = config
                self._schedule.touch(partition_log)  # segment.ms may have changed

    def _config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def _partition_count(self, log_dir: str) -> int:
        return self._count_in_dir.get(log_dir, 0)

    # -- periodic work -------------------------------------------------------------------------------

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log and expire idle producers; returns segments deleted."""
        deleted = 0
        for key, partition_log in list(self._logs.items()):
            try:
                deleted += partition_log.apply_retention(now_ms)
            except KafkaError as e:  # one failing disk must not stop the others' retention
                log.error("retention of %s-%d failed: %s", *key, e.message)
            partition_log.expire_producers(now_ms)
        self._schedule.touch_all(self._logs.values())  # deletions may have rolled or emptied active segments
        self._closer.run(now_ms)
        return deleted

    def run_cleaner(self, now_ms: int) -> None:
        """Swap in a finished compaction and start the next one (the work itself runs on the cleaner thread)."""
        self.cleaner.poll(now_ms)

    def roll_and_flush_due(self, now_ms: int) -> None:
        """Roll segments older than segment_ms and fsync what is due (rolled segments, flush_ms). Visits only the
        logs whose time has come or that were written since the last pass (see MaintenanceSchedule)."""
        for partition_log in self._schedule.take_due(now_ms):
            try:
                partition_log.roll_if_due(now_ms)
                partition_log.flush_if_due(now_ms)
            except KafkaError as e:
                log.error("rolling or flushing %s-%d failed: %s", partition_log.topic, partition_log.partition,
                          e.message)
            self._schedule.touch(partition_log)
        self._closer.run(now_ms)

    def maintenance_due_ms(self, topic: str, partition: int) -> int | None:
        """When the roll-and-flush pass next visits this log, as last computed (None: not until it is written)."""
        partition_log = self._logs.get((topic, partition))
        return None if partition_log is None else self._schedule.scheduled(partition_log)

    # -- description ---------------------------------------------------------------------------------

    def describe_log_dirs(self) -> list[LogDirDescription]:
        """Per log directory: its partitions' sizes (offset lag is 0 on a single node) and disk space."""
        descriptions = []
        for log_dir in self.log_dirs:
            partitions = tuple(
                PartitionDescription(topic, partition, partition_log.size_bytes, 0)
                for (topic, partition), partition_log in sorted(self._logs.items())
                if self._log_dir_of.get((topic, partition)) == log_dir
            )
            try:
                stats = os.statvfs(log_dir)
                total, usable, error = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize, \
                    ErrorCode.none
            except OSError:
                total, usable, error = -1, -1, ErrorCode.kafka_storage_error
            descriptions.append(LogDirDescription(log_dir, error, partitions, total, usable))
        return descriptions
