"""Finding the metadata quorum from `controller.quorum.bootstrap.servers` (KIP-853).

A node configured with bootstrap servers instead of `controller.quorum.voters` asks them, with DescribeQuorum v2,
which nodes are voters and where they listen; any controller answers that, leader or not. The answer only seeds
the node's address book: once it fetches the metadata log, the newest VotersRecord there is the voter set.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import kio.schema.describe_quorum.v2.request as dq_req

from moldau.config import Voter
from moldau.metadata.raft_wire import METADATA_TOPIC
from moldau.net.client import ConnectionFailed, ConnectionPool
from moldau.protocol.codec import make

log = logging.getLogger(__name__)

RETRY_S = 0.5


async def discover_voters(servers: Sequence[tuple[str, int]], pool: ConnectionPool, listener_name: str,
                          timeout_s: float) -> list[Voter]:
    """The voters and their endpoints on `listener_name`, from the first bootstrap server that knows them.
    Raises TimeoutError when none answers within `timeout_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        for host, port in servers:
            voters = await _ask(pool, host, port, listener_name)
            if voters:
                return voters
        await asyncio.sleep(RETRY_S)
    raise TimeoutError(f"no controller among {servers} described the quorum within {timeout_s}s")


async def _ask(pool: ConnectionPool, host: str, port: int, listener_name: str) -> list[Voter]:
    partition = make(dq_req.PartitionData, partition_index=0)
    request = make(dq_req.DescribeQuorumRequest,
                   topics=(make(dq_req.TopicData, topic_name=METADATA_TOPIC, partitions=(partition,)),))
    try:
        response = await pool.request(host, port, request, 2.0)
    except (ConnectionFailed, TimeoutError, OSError) as exc:
        log.debug("bootstrap server %s:%d did not describe the quorum: %s", host, port, exc)
        return []
    voters = []
    for node in response.nodes:
        endpoint = next((e for e in node.listeners if e.name.upper() == listener_name), None)
        if endpoint is not None:
            voters.append(Voter(int(node.node_id), str(endpoint.host), int(endpoint.port)))
    return voters
