"""Moves of partition replicas between this broker's log directories (AlterReplicaLogDirs, KIP-113).

`LogDirMover` starts a move in the log manager and runs the copying in the background, a bounded step at a time
on the event loop (appends and reads of the partition go on meanwhile, to its current log). When the log
manager swaps a caught-up future log in, the hosted partition takes the new log in the same step, so the next
append or read goes to it. A move left by a crash is resumed as soon as the mover starts.

Copying is throttled to `replica.alter.log.dirs.io.max.bytes.per.second` (read at every step, so a dynamic
change applies at once): after a step the mover waits as long as its bytes take at that rate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import ReplicaManager
from moldau.storage.log_manager import MOVE_STEP_BYTES

log = logging.getLogger(__name__)

# The pause when a step copied nothing (the future log waits for its current log to change).
_IDLE_S = 0.01


class LogDirMover:
    def __init__(self, replicas: ReplicaManager, max_bytes_per_second: Callable[[], int] = lambda: 1 << 62) -> None:
        self._replicas = replicas
        self._max_bytes_per_second = max_bytes_per_second
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Resume moves a previous run left unfinished."""
        if self._replicas.log_manager.moving():
            self._ensure_running()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def alter(self, topic: str, partition: int, path: str) -> None:
        """Move the replica to the log directory `path`. Raises KafkaError (LOG_DIR_NOT_FOUND,
        REPLICA_NOT_AVAILABLE, KAFKA_STORAGE_ERROR) as `LogManager.alter_log_dir` does."""
        manager = self._replicas.log_manager
        if (topic, partition) not in self._replicas.partitions and manager.get(topic, partition) is not None:
            raise KafkaError(ErrorCode.replica_not_available, f"{topic}-{partition} is not hosted here")
        manager.alter_log_dir(topic, partition, path)
        if manager.moving():
            self._ensure_running()

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        manager = self._replicas.log_manager
        while manager.moving():
            rate = max(1, self._max_bytes_per_second())
            try:
                progress = manager.advance_moves(min(MOVE_STEP_BYTES, rate))
            except Exception:
                log.exception("moving replicas between log directories failed; retrying")
                await asyncio.sleep(1.0)
                continue
            for key, new_log in progress.swapped:
                hosted = self._replicas.partitions.get(key)
                if hosted is not None:
                    hosted.log = new_log
            await asyncio.sleep(progress.copied_bytes / rate if progress.copied_bytes else _IDLE_S)
