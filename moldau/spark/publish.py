"""Publishing a staged micro-batch: the driver copies it to its targets in ONE transaction.

For micro-batch B of query Q, after every task has staged its rows (`moldau.spark.staging`):

1. a transactional producer with `transactional.id = moldau-spark-sink-<Q>` calls init_transactions. Q is
   Spark's query id, the same for every run from one checkpoint, so this fences the producer of a driver
   that crashed and aborts the transaction it left open. The producer is then kept for the process's next
   batch of Q; if it was fenced meanwhile (another driver of Q initialised the id), the batch is published
   with a new producer, which goes through init_transactions again;
2. the commits topic is read (read_committed): if B is already committed for Q, the batch was published
   before Spark recorded it in its checkpoint, and nothing is written;
3. otherwise, in one transaction: every staged row of B to its target topic and partition, then the
   commit record of B (`moldau.spark.commits`); then commit_transaction.

A crash before 3 completes leaves nothing that a read_committed reader sees, and the replay of B does it
all again; a crash after it is recognised in 2. So each batch reaches read_committed readers exactly once
and whole.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from moldau.spark import commits, staging
from moldau.spark.options import SinkOptions
from moldau.spark.produce import SinkError, has_idle_producer, producer_conf, reused_producer, send_all

log = logging.getLogger(__name__)

TXN_TIMEOUT_S = 60.0
# Test hook (not for production use): "<point>:<batch id>:<file>" makes the driver create <file> and hang
# when it reaches <point> in that batch, so a test can kill it there: "before-commit" (every record produced
# in the open transaction) or "after-commit" (the transaction committed, Spark not told yet).
PAUSE_ENV = "MOLDAU_SPARK_SINK_TEST_PAUSE"
FENCED_CODES = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


def transactional_id(query_id: str) -> str:
    """The transactional id of a query's sink: stable across restarts from the same checkpoint."""
    return f"moldau-spark-sink-{query_id}"


def publish_batch(options: SinkOptions, query_id: str, batch_id: int,
                  staged: Sequence[staging.StagedRange]) -> bool:
    """Copy the staged rows of batch `batch_id` to their targets in one transaction with its commit record.

    Returns False if the batch had been committed before (nothing written). Raises if the transaction
    could not be committed; it is then aborted (or left to the next driver's init_transactions to abort).
    """
    conf = {**producer_conf(options), "transactional.id": transactional_id(query_id)}
    if has_idle_producer(conf):
        try:
            with reused_producer(conf, _init_transactions) as producer:
                return _publish(producer, options, query_id, batch_id, staged)
        except (KafkaException, SinkError) as exc:
            if not _fenced(exc):
                raise
            log.warning("moldau sink: the producer of query %s was fenced since its last batch (%s); "
                        "publishing batch %d with a new one", query_id, str(exc), batch_id)
            # Neither the log record nor the exception keeps the traceback: its frames hold the fenced producer,
            # which would otherwise stay alive, and connected, for as long as the exception does.
            exc.__traceback__ = None
    with reused_producer(conf, _init_transactions) as producer:
        return _publish(producer, options, query_id, batch_id, staged)


def _init_transactions(producer: Producer) -> None:
    producer.init_transactions(TXN_TIMEOUT_S)


def _publish(producer: Producer, options: SinkOptions, query_id: str, batch_id: int,
             staged: Sequence[staging.StagedRange]) -> bool:
    """Steps 2 and 3 with a producer that has run init_transactions."""
    last = commits.last_committed(options.bootstrap, options.client_conf, options.commits_topic, query_id)
    if last is not None and batch_id <= last:
        log.info("moldau sink: batch %d of query %s was committed before; not written again", batch_id, query_id)
        return False
    producer.begin_transaction()
    try:
        written = send_all(producer, _staged_rows(options, staged))
        record_key, value = commits.commit_record(query_id, batch_id, written)
        send_all(producer, [{"topic": options.commits_topic, "partition": commits.PARTITION, "key": record_key,
                             "value": value}])
        _test_pause("before-commit", batch_id)
        producer.commit_transaction(TXN_TIMEOUT_S)
    except BaseException:
        _abort(producer)
        raise
    _test_pause("after-commit", batch_id)
    return True


def _fenced(exc: KafkaException | SinkError) -> bool:
    """Whether the failure means the producer is unusable for good (fenced, or another fatal error)."""
    error = exc.args[0] if isinstance(exc, KafkaException) else exc.error
    return isinstance(error, KafkaError) and (error.fatal() or error.code() in FENCED_CODES)


def _staged_rows(options: SinkOptions, staged: Sequence[staging.StagedRange]) -> Iterator[dict[str, Any]]:
    for staged_range in staged:
        yield from staging.read_staged(options.bootstrap, options.client_conf, staged_range)


def _abort(producer: Producer) -> None:
    """Abort the open transaction if the client still can; if not (fenced, broker gone), the transaction
    times out on the broker or is aborted by the next driver's init_transactions."""
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(TXN_TIMEOUT_S)


def _test_pause(point: str, batch_id: int) -> None:
    spec = os.environ.get(PAUSE_ENV, "")
    wanted_point, _, rest = spec.partition(":")
    wanted_batch, _, marker = rest.partition(":")
    if not marker or wanted_point != point or wanted_batch != str(batch_id):
        return
    parent = os.getppid()
    Path(marker).touch()
    # Hang until killed; a test that kills only the driver leaves this process orphaned, so go then too.
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(1)
