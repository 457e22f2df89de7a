"""All partition logs of a broker, spread over one or more log directories.

Each log directory holds `<topic>-<partition>` directories and a `.moldau_cleanshutdown` marker that
exists only between a clean `close()` and the next start (construction). Without it every partition of that
directory is opened as after a crash (recovery from its recovery point). With it, the offset checkpoint files
`close()` wrote beside it (`log_dir_checkpoints`, Kafka's format) give every log's offsets, and each log is
opened deferred (`PartitionLog.open_deferred`): its directory is read on first use, or by the periodic pass for
logs holding records, so a start with 10,000 partitions reads three files instead of 10,000 directories. The
marker names the broker epoch the logs were closed under (`previous_broker_epoch`, KIP-966). Directories named
`*-delete` are deletions interrupted by a crash and are removed at start.

A partition being moved to another directory (AlterReplicaLogDirs) has a second, *future* log there,
`<topic>-<partition>.<hex>-future` (`moldau.storage.replica_move`), that `advance_moves` fills and then swaps in
for the current one. A crash mid-move is resumed at the next start: a future log whose current log still exists
is opened and copying goes on; one whose current log is gone (the crash fell between the two renames of the
swap) was complete, and becomes the partition's log.

A directory whose file operations fail (other than for a full disk, which passes once space is freed) is taken
offline (KIP-112): its logs stay registered but refuse every read and write with KAFKA_STORAGE_ERROR, moves
to or from it are given up, new partitions go to the other directories, and nothing in it is touched again
until a restart.

Invariants: one `PartitionLog` per (topic, partition), in one directory (the same partition in two
directories is refused at start); at most one future log per partition, never in its current log's
directory; a new partition goes to the directory chosen for it by AlterReplicaLogDirs if any, else to the
one holding the fewest partitions. The manager shares one `DeferredCloser` among its logs and runs it from its
periodic methods, so fds of deleted segments stay valid for `file_delete_delay_ms`. It owns the
`LogCleaner` (compaction runs on its own thread; `run_cleaner` applies and schedules it) and stops it
before closing the logs. Not thread-safe.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

from moldau.clock import Clock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.cleaner import CleanerSettings, LogCleaner
from moldau.storage.log import PartitionLog, parse_partition_dir_name
from moldau.storage.log_config import LogConfig
from moldau.storage.log_dir_checkpoints import LogDirOffsets, read_log_dir_offsets, write_log_dir_offsets
from moldau.storage.maintenance_schedule import MaintenanceSchedule
from moldau.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    fsync_directory,
    sync_file_system,
    write_atomically,
)
from moldau.storage.replica_move import copy_step, future_dir_name, parse_future_dir_name
from moldau.storage.segment import DeferredCloser

__all__ = [
    "CLEAN_SHUTDOWN_MARKER", "LogDirConflict", "LogDirDescription", "LogManager", "MoveProgress",
    "PartitionDescription",
]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_MARKER = ".moldau_cleanshutdown"
# Present once every batch in the log directory has had its records walked (logs written by a Moldau that did
# not validate records get one full scan on the first start of a version that does).
RECORDS_VALIDATED_MARKER = ".moldau_records_validated"
_DELETE_SUFFIX = "-delete"
# How much a move copies per step of the event loop, so that producers and fetches wait little behind it.
MOVE_STEP_BYTES = 1024 * 1024
# Deferred logs with records loaded per periodic pass (one a second): 10,000 of them within a few minutes, each pass
# short enough not to hold up requests.
DEFERRED_LOADS_PER_PASS = 50
# Segments a retention pass deletes between two chances for clients to be served (`retention_slices`): each is
# four renames on the event loop (about 0.1 ms in all, more while the file system's journal is busy). A pass
# deleting 120 segments at once held every client for 6-9 ms; slices of 8 took 0.8-1.7 ms each, and of 4 half that.
RETENTION_SEGMENTS_PER_SLICE = 4


def _read_clean_shutdown_marker(path: str) -> int | None:
    """None without the marker; else the broker epoch it names (Kafka's `{"version":0,"brokerEpoch":N}`), -1 for
    a marker that names none (an empty one, as older versions wrote)."""
    try:
        with open(path, "rb") as marker:
            content = marker.read()
    except FileNotFoundError:
        return None
    try:
        epoch = json.loads(content)["brokerEpoch"]
        return epoch if isinstance(epoch, int) else -1
    except (ValueError, KeyError, TypeError):
        return -1


class LogDirConflict(Exception):
    """The log directories cannot be opened together (the same partition in two of them)."""


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


@dataclass(frozen=True, slots=True)
class MoveProgress:
    """What one `advance_moves` step did: bytes copied, and the partitions swapped to their new log."""

    copied_bytes: int
    swapped: tuple[tuple[tuple[str, int], PartitionLog], ...]


class LogManager:
    """Opens, creates, deletes and maintains the partition logs of this broker."""

    def __init__(
        self, log_dirs: list[str], clock: Clock, default_config: LogConfig, *,
        topic_configs: Mapping[str, LogConfig] | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        cleaner_settings: CleanerSettings | Callable[[], CleanerSettings] | None = None,
        offline_dirs: Collection[str] = (),
        directory_ids: Mapping[str, str] | None = None,
    ) -> None:
        """Open every partition found in `log_dirs` (with `topic_configs` where given, else the default
        config until `create`/`update_config` supplies the topic's own). `offline_dirs` (already found unusable)
        and any directory that fails while being opened start offline; if none is left, OSError is raised.
        `directory_ids`: each readable directory's `directory.id` (from its meta.properties, KIP-858)."""
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
        # Logs whose directory the metadata may not show yet (KIP-858): opened, created or moved since the broker
        # last found the metadata in agreement, so that recording assignments costs O(changes), not O(logs).
        self._unrecorded: set[tuple[str, int]] = set()
        self._schedule = MaintenanceSchedule()  # which logs the periodic roll-and-flush pass must visit
        # Deferred logs holding records, loaded a few per periodic pass so that rolling by age and retention see
        # them without the start reading every directory (see `PartitionLog.open_deferred`).
        self._to_load: deque[PartitionLog] = deque()
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._futures: dict[tuple[str, int], PartitionLog] = {}
        self._future_dir_of: dict[tuple[str, int], str] = {}
        # Where AlterReplicaLogDirs asked a partition not hosted yet to go (Kafka's preferred log dir).
        self._preferred_dir: dict[tuple[str, int], str] = {}
        # Directories that failed (KIP-112): their logs stay registered, refusing every read and write, so that
        # a partition of theirs is never created afresh elsewhere; a restart brings them back if they are fine.
        self.offline_dirs: set[str] = {os.path.abspath(d) for d in offline_dirs}
        # Whether a directory was offline from the start: any partition not found may be in it, unseen. Only a
        # partition the metadata assigns to one of the readable directories (KIP-858) is created then; one with
        # no assignment waits until a restart finds every directory readable (or the dead one is taken out).
        self.unseen_partitions = False
        self.directory_ids: dict[str, str] = {os.path.abspath(d): i for d, i in (directory_ids or {}).items()}
        # Called with the directory whenever one goes offline at runtime (the broker reports it at once), and
        # whenever a log is created in one (the broker records the assignment at once).
        self.on_dir_offline: Callable[[str], None] = lambda log_dir: None
        self.on_log_created: Callable[[str], None] = lambda log_dir: None
        self.cleaner = LogCleaner(clock, self.logs, cleaner_settings or CleanerSettings())
        # The broker epoch each directory's clean-shutdown marker names (-1: none), and the one they all name.
        self._clean_epochs: dict[str, int] = {}
        self._start()
        epochs = {self._clean_epochs.get(d, -1) for d in self.log_dirs}
        self.previous_broker_epoch = epochs.pop() if len(epochs) == 1 and not self.offline_dirs else -1

    # -- life cycle ----------------------------------------------------------------------------------

    def _start(self) -> None:
        found = self._scan_dirs()
        for log_dir in self.log_dirs:
            if log_dir in self.offline_dirs:
                continue
            try:
                self._open_dir_logs(log_dir, found[log_dir])
            except (OSError, KafkaError) as exc:
                self.mark_offline(log_dir, f"opening its logs failed: {exc}")
        self.unseen_partitions = bool(self.offline_dirs)
        if len(self.offline_dirs) == len(self.log_dirs):
            raise OSError(f"every log directory is unusable: {', '.join(sorted(self.offline_dirs))}")

    def _open_dir_logs(self, log_dir: str, entries: list[tuple[str, tuple[str, int], bool]]) -> None:
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER)
        clean_epoch = _read_clean_shutdown_marker(marker)
        clean = clean_epoch is not None
        if clean_epoch is not None:
            self._clean_epochs[log_dir] = clean_epoch
        validated = os.path.exists(os.path.join(log_dir, RECORDS_VALIDATED_MARKER))
        started = time.monotonic()
        # After a clean shutdown the directory's checkpoints give every log's offsets: its own files are read on
        # first use. They are stale after a crash, so only the marker makes them trustworthy.
        checkpointed = read_log_dir_offsets(log_dir) if clean and validated else {}
        deferred = self._open_dir(log_dir, entries, clean, checkpointed, recover_all=not validated)
        log.info("opened %d partition logs in %s in %.0f ms (%s)", len(entries), log_dir,
                 (time.monotonic() - started) * 1000,
                 "first start with record validation: every record re-validated" if not validated else
                 f"clean shutdown, no recovery; {deferred} read on first use" if clean else
                 "after an unclean shutdown: tails re-validated")
        if not validated:
            self._mark_records_validated(log_dir)
        if clean:
            os.unlink(marker)
            fsync_directory(log_dir)

    def _scan_dirs(self) -> dict[str, list[tuple[str, tuple[str, int], bool]]]:
        """Per log directory: (name, partition, is_future) of the partition directories to open, after
        removing interrupted deletions, promoting futures whose swap a crash interrupted and refusing a
        partition found in two directories."""
        found: dict[str, list[tuple[str, tuple[str, int], bool]]] = {}
        current_in: dict[tuple[str, int], str] = {}
        futures: list[tuple[str, str, tuple[str, int]]] = []
        for log_dir in self.log_dirs:
            found[log_dir] = []
            if log_dir in self.offline_dirs:
                log.error("log directory %s is offline: its partitions are offline until a restart finds it "
                          "working", log_dir)
                continue
            try:
                os.makedirs(log_dir, exist_ok=True)
                # The entries' types come with the listing: no stat per partition directory.
                with os.scandir(log_dir) as listing:
                    directories = {e.name for e in listing if e.is_dir()}
                names = sorted(directories)
            except OSError as exc:
                log.error("log directory %s cannot be read (%s): it starts offline", log_dir, exc)
                self.offline_dirs.add(log_dir)
                continue
            for name in names:
                path = os.path.join(log_dir, name)
                if name not in directories:
                    continue
                if name.endswith(_DELETE_SUFFIX):
                    shutil.rmtree(path, ignore_errors=True)
                elif (future := parse_future_dir_name(name)) is not None:
                    futures.append((log_dir, name, future))
                elif (parsed := parse_partition_dir_name(name)) is not None:
                    if parsed in current_in:
                        raise LogDirConflict(f"partition {parsed[0]}-{parsed[1]} is in two log directories: "
                                             f"{current_in[parsed]} and {log_dir}")
                    current_in[parsed] = log_dir
                    found[log_dir].append((name, parsed, False))
        resumed: set[tuple[str, int]] = set()
        for log_dir, name, key in futures:
            path = os.path.join(log_dir, name)
            if key in resumed or current_in.get(key) == log_dir:
                log.warning("discarding %s: another copy of %s-%d is kept", path, *key)
                shutil.rmtree(path, ignore_errors=True)
            elif key in current_in:
                resumed.add(key)
                found[log_dir].append((name, key, True))
            elif self.offline_dirs:
                # Its current log may be in a directory that cannot be read: neither complete nor discard it.
                log.warning("leaving %s as it is: the log it copies may be in an offline log directory", path)
            else:
                # The swap renamed the current log away and crashed before renaming this one: it was complete.
                log.info("completing the move of %s-%d to %s interrupted by a crash", *key, log_dir)
                final = f"{key[0]}-{key[1]}"
                os.replace(path, os.path.join(log_dir, final))
                fsync_directory(log_dir)
                current_in[key] = log_dir
                found[log_dir].append((final, key, False))
        return found

    @staticmethod
    def _mark_records_validated(log_dir: str) -> None:
        """Every batch in `log_dir` has had its records walked: later starts need not do it again."""
        try:
            with open(os.path.join(log_dir, RECORDS_VALIDATED_MARKER), "w") as marker:
                marker.write("Every record batch here was validated record by record.\n")
            fsync_directory(log_dir)
        except OSError as exc:  # a full disk: the next start validates again
            log.warning("%s: cannot write %s: %s", log_dir, RECORDS_VALIDATED_MARKER, exc)

    def _open_dir(self, log_dir: str, entries: list[tuple[str, tuple[str, int], bool]], clean: bool,
                  checkpointed: LogDirOffsets, recover_all: bool = False) -> int:
        """Open the directory's logs; those `checkpointed` (not futures) deferred. Returns how many were."""
        deferred = 0
        for name, key, is_future in entries:
            offsets = None if is_future else checkpointed.get(key)
            if offsets is not None:
                start, recovery_point, high_watermark = offsets
                opened = PartitionLog.open_deferred(
                    os.path.join(log_dir, name), self._config_for(key[0]), self._clock, log_start_offset=start,
                    log_end_offset=recovery_point, high_watermark=high_watermark,
                    producer_id_expiration_ms=self.producer_id_expiration_ms, closer=self._closer)
                deferred += 1
                if recovery_point > start:
                    self._to_load.append(opened)  # its segments may have to roll by age or go by retention
            else:
                opened = PartitionLog.open(
                    os.path.join(log_dir, name), self._config_for(key[0]), self._clock, None, clean_shutdown=clean,
                    producer_id_expiration_ms=self.producer_id_expiration_ms, closer=self._closer,
                    recover_all=recover_all, log_dir_marker=True,
                )
            opened.on_io_error = self._on_io_error
            if is_future:
                opened.topic, opened.partition = key
                self._futures[key] = opened
                self._future_dir_of[key] = log_dir
            else:
                self._logs[key] = opened
                self._log_dir_of[key] = log_dir
                self._count_in_dir[log_dir] += 1
                self._unrecorded.add(key)
            self._follow(opened)
        return deferred

    def close(self, broker_epoch: int = -1) -> None:
        """Close every log, then mark clean each log directory whose logs all closed cleanly, naming `broker_epoch`
        (the broker's registration, -1 if none) in the marker: the next start tells the controller (KIP-966)."""
        self.cleaner.stop()
        failed_dirs = set(self.offline_dirs)
        for logs, dir_of in ((self._logs, self._log_dir_of), (self._futures, self._future_dir_of)):
            for key, partition_log in logs.items():
                if dir_of[key] in self.offline_dirs:
                    continue  # not touched again: the next start recovers what it can
                try:
                    partition_log.close()
                except KafkaError as e:
                    log.error("closing %s-%d failed: %s", *key, e.message)
                    failed_dirs.add(dir_of[key])
        self._closer.close_all()
        for log_dir in self.log_dirs:
            if log_dir in failed_dirs:
                continue
            try:
                write_log_dir_offsets(log_dir, {key: partition_log.checkpoint_offsets()
                                                for key, partition_log in self._logs.items()
                                                if self._log_dir_of[key] == log_dir and partition_log.on_disk})
                # What the logs wrote at close without fsyncs (checkpoints, snapshots, the directory's offsets) is
                # durable before the directory's marker says that they closed cleanly.
                sync_file_system(log_dir)
                write_atomically(os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER),
                                 json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode("ascii"))
            except OSError as e:
                log.error("%s not marked clean, the next start recovers it: %s", log_dir, e)
        self._logs.clear()
        self._log_dir_of.clear()
        self._futures.clear()
        self._future_dir_of.clear()
        self._count_in_dir.clear()
        self._unrecorded.clear()
        self._to_load.clear()
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
        self, topic: str, partition: int, topic_id: uuid.UUID | None, config: LogConfig | None = None,
        assigned_dir_id: str = "", defer: bool = False,
    ) -> PartitionLog:
        """The partition's log, created in the least loaded directory if it does not exist yet; an existing
        log takes `config` when given. `assigned_dir_id` is the directory the metadata assigns the replica to
        (KIP-858; "" if none). While a directory that was offline from the start may hold logs nobody has
        seen, a log is created only in the readable directory the metadata assigns it to; without such an
        assignment none is (KAFKA_STORAGE_ERROR): the partition might be in the unseen directory, and an empty
        log in its place would lose its records. `defer`: a log whose directory does not exist yet is made on
        first use (`PartitionLog.create_deferred`), for a caller creating thousands at once."""
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
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        assigned = self.dir_with_id(assigned_dir_id)
        if self.unseen_partitions and assigned not in online:
            raise KafkaError(ErrorCode.kafka_storage_error, f"{topic}-{partition} may be in a log directory that "
                             f"was offline at start ({', '.join(sorted(self.offline_dirs))})")
        if not online:
            raise KafkaError(ErrorCode.kafka_storage_error, f"cannot create {topic}-{partition}: every log "
                             "directory is offline")
        preferred = self._preferred_dir.pop(key, None)
        if self.unseen_partitions:
            preferred = assigned
        log_dir = preferred if preferred in online else min(
            online, key=lambda d: (self._partition_count(d), self.log_dirs.index(d)))
        directory = os.path.join(log_dir, f"{topic}-{partition}")
        try:
            if not defer or os.path.lexists(directory):  # one left by an earlier life is read at once
                created = PartitionLog.open(
                    directory, self._config_for(topic), self._clock, topic_id,
                    producer_id_expiration_ms=self.producer_id_expiration_ms, closer=self._closer,
                    log_dir_marker=True,
                )
            else:
                created = PartitionLog.create_deferred(
                    directory, self._config_for(topic), self._clock, topic_id,
                    producer_id_expiration_ms=self.producer_id_expiration_ms, closer=self._closer)
        except OSError as e:
            raise KafkaError(ErrorCode.kafka_storage_error, f"cannot create {topic}-{partition}: {e}") from e
        created.on_io_error = self._on_io_error
        self._logs[key] = created
        self._log_dir_of[key] = log_dir
        self._count_in_dir[log_dir] += 1
        self._unrecorded.add(key)
        self._follow(created)
        self.on_log_created(log_dir)
        return created

    def _follow(self, partition_log: PartitionLog) -> None:
        """Put a log opened or created here on the maintenance schedule, and keep it there as it is written."""
        partition_log.on_write = self._schedule.touch
        self._schedule.touch(partition_log)

    def delete(self, topic: str, partition: int) -> bool:
        """Delete a partition's log: rename its directory to `*.<hex>-delete` (atomic, so a crash leaves
        it for the next start to remove), then remove it. Returns False if there was no such log."""
        key = (topic, partition)
        self._discard_future(key)
        doomed_log = self._logs.pop(key, None)
        log_dir = self._log_dir_of.pop(key, None)
        self._unrecorded.discard(key)
        if log_dir is not None:
            self._count_in_dir[log_dir] -= 1
        if doomed_log is None:
            return False
        self._schedule.forget(doomed_log)
        doomed_log.on_write = None
        if log_dir in self.offline_dirs:
            log.warning("%s-%d is in the offline log directory %s: its files are left there", *key, log_dir)
            return True
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
        for logs in (self._logs, self._futures):
            for (log_topic, _), partition_log in logs.items():
                if log_topic == topic:
                    partition_log.config = config
                    self._schedule.touch(partition_log)  # segment.ms may have changed

    def _config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def _partition_count(self, log_dir: str) -> int:
        return self._count_in_dir.get(log_dir, 0)

    # -- moves between log directories (AlterReplicaLogDirs) ------------------------------------------

    def dir_with_id(self, directory_id: str) -> str | None:
        """The directory whose `directory.id` this is, if it is one of ours."""
        return next((d for d, i in self.directory_ids.items() if i == directory_id and directory_id), None)

    def online_directory_ids(self) -> list[str]:
        return [self.directory_ids[d] for d in self.log_dirs if d in self.directory_ids and d not in self.offline_dirs]

    def offline_directory_ids(self) -> list[str]:
        """The ids of directories that went offline; one unusable from the start has no id we could read."""
        return [self.directory_ids[d] for d in self.log_dirs if d in self.directory_ids and d in self.offline_dirs]

    def unrecorded_assignments(self) -> list[tuple[str, str, int]]:
        """(directory.id, topic, partition) of the logs whose directory the metadata may not show yet: opened,
        created or moved since `assignments_recorded` last named them, or named by `check_assignment`. A log in
        an offline directory, or in one without a known id, is never reported, so it is forgotten here."""
        pending = []
        for key in list(self._unrecorded):
            log_dir = self._log_dir_of[key]
            if log_dir in self.offline_dirs or log_dir not in self.directory_ids:
                self._unrecorded.discard(key)
            else:
                pending.append((self.directory_ids[log_dir], *key))
        return pending

    def assignments_recorded(self, partitions: Iterable[tuple[str, int]]) -> None:
        """The metadata shows where these logs are (or no longer concerns them)."""
        self._unrecorded.difference_update(partitions)

    def check_assignment(self, topic: str, partition: int, directory_id: str) -> None:
        """The metadata now assigns this partition's replica to `directory_id`: if its log is elsewhere, it is
        reported again."""
        log_dir = self._log_dir_of.get((topic, partition))
        if log_dir is not None and self.directory_ids.get(log_dir) != directory_id:
            self._unrecorded.add((topic, partition))

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        """The directory holding the partition's current log, None if there is none."""
        return self._log_dir_of.get((topic, partition))

    def future_dir_of(self, topic: str, partition: int) -> str | None:
        """The directory the partition is being moved to, None if it is not moving."""
        return self._future_dir_of.get((topic, partition))

    def moving(self) -> bool:
        return bool(self._futures)

    def check_log_dir(self, path: str) -> str:
        """`path` as one of this broker's online log directories. Raises KafkaError LOG_DIR_NOT_FOUND if it is
        none of them (Kafka compares absolute paths), KAFKA_STORAGE_ERROR if it is offline."""
        wanted = os.path.abspath(path) if os.path.isabs(path) else None
        if wanted is None or wanted not in self.log_dirs:
            raise KafkaError(ErrorCode.log_dir_not_found, f"{path} is not a log directory of this broker")
        if wanted in self.offline_dirs:
            raise KafkaError(ErrorCode.kafka_storage_error, f"the log directory {wanted} is offline")
        return wanted

    def alter_log_dir(self, topic: str, partition: int, path: str) -> None:
        """Start moving the partition's log to `path` (or stop a move when `path` is where it is now).

        A partition not hosted yet goes to `path` when it is created: Kafka answers REPLICA_NOT_AVAILABLE for
        it, so the tool asking retries once the replica exists. Raises KafkaError: LOG_DIR_NOT_FOUND,
        REPLICA_NOT_AVAILABLE, KAFKA_STORAGE_ERROR (the future log cannot be created)."""
        target = self.check_log_dir(path)
        key = (topic, partition)
        current = self._logs.get(key)
        if current is not None and current.offline:
            raise KafkaError(ErrorCode.kafka_storage_error, f"{topic}-{partition} is in an offline log directory")
        if current is None:
            self._preferred_dir[key] = target
            raise KafkaError(ErrorCode.replica_not_available, f"{topic}-{partition} is not on this broker yet")
        if self._log_dir_of[key] == target:
            self._discard_future(key)  # moving back where it is: a move under way is cancelled
            return
        if self._future_dir_of.get(key) == target:
            return
        self._discard_future(key)
        try:
            future = PartitionLog.open(
                os.path.join(target, future_dir_name(topic, partition)), current.config, self._clock,
                current.topic_id, producer_id_expiration_ms=self.producer_id_expiration_ms, closer=self._closer,
            )
            future.topic, future.partition = key
            future.on_io_error = self._on_io_error
            future.truncate_fully_and_start_at(current.log_start_offset)
        except (OSError, KafkaError) as e:
            raise KafkaError(ErrorCode.kafka_storage_error, f"cannot create the future log in {target}: {e}") from e
        self._futures[key] = future
        self._future_dir_of[key] = target
        self._follow(future)
        log.info("moving %s-%d from %s to %s", topic, partition, self._log_dir_of[key], target)

    def _discard_future(self, key: tuple[str, int]) -> None:
        future = self._futures.pop(key, None)
        log_dir = self._future_dir_of.pop(key, None)
        if future is not None:
            self._schedule.forget(future)
            future.on_write = None
            if log_dir in self.offline_dirs:
                future.offline = True  # left on the failed disk; the next start discards it
            else:
                future.delete()

    # -- failed log directories (KIP-112) ------------------------------------------------------------

    def _on_io_error(self, partition_log: PartitionLog, error: OSError) -> None:
        key = (partition_log.topic, partition_log.partition)
        if self._logs.get(key) is partition_log:
            log_dir = self._log_dir_of[key]
        elif self._futures.get(key) is partition_log:
            log_dir = self._future_dir_of[key]
        else:
            return
        self.mark_offline(log_dir, f"{partition_log.directory}: {error}")

    def mark_offline(self, log_dir: str, reason: str) -> None:
        """Take a failed log directory offline: its partitions answer KAFKA_STORAGE_ERROR from now on, moves to
        or from it are given up, and the other directories carry on."""
        if log_dir in self.offline_dirs:
            return
        self.offline_dirs.add(log_dir)
        offline = [key for key, d in self._log_dir_of.items() if d == log_dir]
        log.error("log directory %s is offline after an I/O error (%s); its %d partitions are offline until a "
                  "restart finds it working: %s", log_dir, reason, len(offline),
                  ", ".join(f"{t}-{p}" for t, p in offline[:10]))
        for key in offline:
            self._logs[key].offline = True
        for key in [k for k in self._futures if k in offline or self._future_dir_of[k] == log_dir]:
            self._discard_future(key)
        self.on_dir_offline(log_dir)

    def advance_moves(self, max_bytes: int = MOVE_STEP_BYTES) -> MoveProgress:
        """Copy up to about `max_bytes` into the future logs; swap in each one that has caught up. The result
        names the partitions whose log was replaced (whoever holds the old log must take the new one)."""
        swapped: list[tuple[tuple[str, int], PartitionLog]] = []
        budget = max_bytes
        for key, future in list(self._futures.items()):
            current = self._logs[key]
            try:
                budget -= copy_step(current, future, budget)
                if future.log_end_offset == current.log_end_offset:
                    swapped.append((key, self._swap(key, current, future)))
            except KafkaError as e:
                # The target directory failed (or the current one cannot be read): give the move up.
                log.error("moving %s-%d to %s failed, abandoned: %s", *key, self._future_dir_of[key], e.message)
                self._discard_future(key)
            if budget <= 0:
                break
        return MoveProgress(max_bytes - budget, tuple(swapped))

    def _swap(self, key: tuple[str, int], current: PartitionLog, future: PartitionLog) -> PartitionLog:
        """Make the caught-up future log the partition's log. The current directory is renamed to `-delete`
        first, then the future one to `<topic>-<partition>`: a crash between the two leaves only the future,
        which the next start completes."""
        future.high_watermark_follows_log_end = current.high_watermark_follows_log_end
        future.transaction_verification = current.transaction_verification
        future.leader_epochs.assign_all(current.leader_epochs.entries)
        future.high_watermark = current.high_watermark
        if future.log_start_offset < current.log_start_offset:
            future.delete_records_before(current.log_start_offset)
        future.flush()
        old_dir, new_dir = self._log_dir_of[key], self._future_dir_of[key]
        doomed = os.path.join(old_dir, f"{key[0]}-{key[1]}.{uuid.uuid4().hex}{_DELETE_SUFFIX}")
        try:
            current.rename_directory(doomed)
            fsync_directory(old_dir)
            future.rename_directory(os.path.join(new_dir, f"{key[0]}-{key[1]}"))
            fsync_directory(new_dir)
        except OSError as e:
            raise KafkaError(ErrorCode.kafka_storage_error, f"swapping in the moved log failed: {e}") from e
        del self._futures[key], self._future_dir_of[key]
        self._logs[key] = future
        self._log_dir_of[key] = new_dir
        self._count_in_dir[old_dir] -= 1
        self._count_in_dir[new_dir] += 1
        self._unrecorded.add(key)
        self._schedule.forget(current)
        current.on_write = None
        current.delete()
        log.info("moved %s-%d from %s to %s (log end %d)", *key, old_dir, new_dir, future.log_end_offset)
        self.on_log_created(new_dir)
        return future

    # -- periodic work -------------------------------------------------------------------------------

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log and expire idle producers at once; returns segments deleted."""
        return sum(self.retention_slices(now_ms))

    def retention_slices(self, now_ms: int) -> Iterator[int]:
        """Apply retention to every log and expire idle producers, in slices of at most
        `RETENTION_SEGMENTS_PER_SLICE` segments deleted: yields each slice's count, so that the caller (the
        broker's maintenance task) can serve clients between them. A log deleted or replaced meanwhile is left."""
        pending = 0
        for key, partition_log in list(self._logs.items()):
            while not partition_log.offline and self._logs.get(key) is partition_log:
                budget = RETENTION_SEGMENTS_PER_SLICE - pending
                try:
                    deleted = partition_log.apply_retention(now_ms, budget)
                except KafkaError as e:  # one failing disk must not stop the others' retention
                    log.error("retention of %s-%d failed: %s", *key, e.message)
                    break
                pending += deleted
                if deleted < budget:
                    partition_log.expire_producers(now_ms)
                    break  # this log is done
                yield pending
                pending = 0
        self._schedule.touch_all(self._logs.values())  # deletions may have rolled or emptied active segments
        self._closer.run(now_ms)
        if pending:
            yield pending

    def run_cleaner(self, now_ms: int) -> None:
        """Swap in a finished compaction and start the next one (the work itself runs on the cleaner thread)."""
        self.cleaner.poll(now_ms)

    def roll_and_flush_due(self, now_ms: int) -> None:
        """Roll segments older than segment_ms and fsync what is due (rolled segments, flush_ms). Visits only the
        logs (and future logs of moves) whose time has come or that were written since the last pass (see
        MaintenanceSchedule); logs of an offline directory are left alone."""
        self._load_some_deferred()
        for partition_log in self._schedule.take_due(now_ms):
            if partition_log.offline:
                continue
            try:
                partition_log.roll_if_due(now_ms)
                partition_log.flush_if_due(now_ms)
            except KafkaError as e:
                log.error("rolling or flushing %s-%d failed: %s", partition_log.topic, partition_log.partition,
                          e.message)
            self._schedule.touch(partition_log)
        self._closer.run(now_ms)

    def _load_some_deferred(self) -> None:
        """Load the next few deferred logs holding records, and put them on the maintenance schedule."""
        for _ in range(min(DEFERRED_LOADS_PER_PASS, len(self._to_load))):
            partition_log = self._to_load.popleft()
            if partition_log.loaded or partition_log.offline or partition_log.on_write is None:
                continue  # loaded by a client already, or deleted, or in a directory gone offline
            try:
                partition_log.load()
            except KafkaError as e:
                log.error("loading %s-%d failed: %s", partition_log.topic, partition_log.partition, e.message)
                continue
            self._schedule.touch(partition_log)

    def maintenance_due_ms(self, topic: str, partition: int) -> int | None:
        """When the roll-and-flush pass next visits this log, as last computed (None: not until it is written)."""
        partition_log = self._logs.get((topic, partition))
        return None if partition_log is None else self._schedule.scheduled(partition_log)

    # -- description ---------------------------------------------------------------------------------

    def describe_log_dirs(self) -> list[LogDirDescription]:
        """Per log directory: its partitions' sizes and disk space. A future log (a move under way) is listed
        in its target directory with how far it trails the current log (offset lag); other partitions have
        no lag on this broker."""
        descriptions = []
        for log_dir in self.log_dirs:
            current = [
                PartitionDescription(topic, partition, partition_log.size_bytes, 0)
                for (topic, partition), partition_log in sorted(self._logs.items())
                if self._log_dir_of.get((topic, partition)) == log_dir
            ]
            futures = [
                PartitionDescription(key[0], key[1], future.size_bytes,
                                     max(self._logs[key].log_end_offset - future.log_end_offset, 0), True)
                for key, future in sorted(self._futures.items()) if self._future_dir_of[key] == log_dir
            ]
            try:
                stats = os.statvfs(log_dir)
                total, usable, error = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize, \
                    ErrorCode.none
            except OSError:
                total, usable, error = -1, -1, ErrorCode.kafka_storage_error
            if log_dir in self.offline_dirs:
                error = ErrorCode.kafka_storage_error
            descriptions.append(LogDirDescription(log_dir, error, tuple(current + futures), total, usable))
        return descriptions
