"""The connection side of `moldau transactions`: a `Session` that sends kio requests to the cluster's brokers,
the DescribeTransactions entities kio cannot read as brokers send them, and retrying while a transaction
coordinator moves or loads.

kio reads the field types of its entities at run time, so this module must not postpone annotations.
"""

import asyncio
import datetime
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import kio.schema.describe_transactions.v0.response as dt_res
import kio.schema.metadata.v12.request as md_req
from kio.static.constants import EntityType

from moldau.cli.command_config import to_authenticator, to_client_security
from moldau.cli.common import REQUEST_TIMEOUT_S, CliError, bootstrap_addresses, check_reachable, command_properties
from moldau.net.client import ConnectionFailed, ConnectionPool
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode

T = TypeVar("T")
Address = tuple[str, int]
TopicPartition = tuple[str, int]

# Coordinator errors worth asking again about: a coordinator moving or still loading its state.
RETRIABLE = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                       ErrorCode.coordinator_load_in_progress})
RETRY_INTERVAL_S = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedTransaction:
    """kio's DescribeTransactions v0 TransactionState, but with the start time as plain milliseconds: kio cannot
    read the -1 brokers send when no transaction has started (state Empty, or an error). kio reads the field
    types at run time, so this module must not postpone annotations."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar = dt_res.TransactionState.__version__
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar = dt_res.TransactionState.__api_key__
    __header_schema__: ClassVar = dt_res.TransactionState.__header_schema__
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    transactional_id: str = field(metadata={"kafka_type": "string"})
    transaction_state: str = field(metadata={"kafka_type": "string"})
    transaction_timeout: datetime.timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    transaction_start_time: int = field(metadata={"kafka_type": "int64"})
    producer_id: int = field(metadata={"kafka_type": "int64"})
    producer_epoch: int = field(metadata={"kafka_type": "int16"})
    topics: tuple[dt_res.TopicData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTransactionsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar = dt_res.DescribeTransactionsResponse.__version__
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar = dt_res.DescribeTransactionsResponse.__api_key__
    __header_schema__: ClassVar = dt_res.DescribeTransactionsResponse.__header_schema__
    throttle_time: datetime.timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    transaction_states: tuple[DescribedTransaction, ...]


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"


@dataclass(frozen=True, slots=True)
class Cluster:
    brokers: dict[int, Address]
    leaders: dict[TopicPartition, int]  # -1: no leader right now
    topic_errors: dict[str, int]


class Session:
    """Requests to the cluster's brokers, one connection per broker."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap_addresses(bootstrap)
        props = command_properties()
        self.pool = ConnectionPool("moldau-cli", to_client_security(props), to_authenticator(props))

    async def send(self, address: Address, request: Any, response_type: Any = None) -> Any:
        """Send a kio request and return the response (as `response_type` if given). Raises CliError."""
        name = type(request).__name__.removesuffix("Request")
        try:
            return await self.pool.request(*address, request, REQUEST_TIMEOUT_S, response_type)
        except ConnectionFailed as exc:
            raise CliError(f"{name} failed: {exc}") from None
        except TimeoutError:
            raise CliError(f"{name} to {address[0]}:{address[1]} got no answer within "
                           f"{REQUEST_TIMEOUT_S:g} s") from None

    async def send_any(self, request: Any) -> Any:
        """Send a request to the first bootstrap server that answers. Raises CliError."""
        failure = CliError("no bootstrap server")
        for address in self.bootstrap:
            try:
                return await self.send(address, request)
            except CliError as exc:
                failure = exc
        raise failure

    async def metadata(self, topics: Sequence[str] | None) -> Cluster:
        """Brokers and partition leaders of `topics` (None: every topic)."""
        wanted = None if topics is None else tuple(
            make(md_req.MetadataRequestTopic, topic_id=uuid.UUID(int=0), name=t) for t in topics)
        response = await self.send_any(make(md_req.MetadataRequest, topics=wanted, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False))
        return Cluster({b.node_id: (b.host, b.port) for b in response.brokers},
                       {(t.name, p.partition_index): p.leader_id for t in response.topics for p in t.partitions},
                       {t.name: t.error_code for t in response.topics if t.error_code != ErrorCode.none})

    def close(self) -> None:
        self.pool.close()


def run_session(bootstrap: str, action: Callable[[Session], Awaitable[T]]) -> T:
    """Run `action` with a session on the cluster, closing its connections afterwards."""
    check_reachable(bootstrap)

    async def main() -> T:
        session = Session(bootstrap)
        try:
            return await action(session)
        finally:
            session.close()

    return asyncio.run(main())


class Retriable(Exception):
    """A coordinator error worth asking again about (RETRIABLE)."""

    def __init__(self, code: int) -> None:
        super().__init__(error_name(code))
        self.code = code


async def retrying(action: Callable[[], Awaitable[T]]) -> T:
    """Call `action` again while it raises Retriable, for up to the request timeout."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while True:
        try:
            return await action()
        except Retriable as exc:
            if time.monotonic() >= deadline:
                raise CliError(f"the transaction coordinator is not available ({exc})") from None
        await asyncio.sleep(RETRY_INTERVAL_S)

