"""A tiny synchronous network for unit tests: deliver every sent message until nothing moves."""

from __future__ import annotations

import random

from moldau.raft import Config, Entry, Message, PersistedState, RaftNode, Send

CONFIG = Config()
LATE_MS = 10_000  # past any election timeout drawn at time 0


class TopOfRange(random.Random):
    """Draws the largest value of every range: election timeouts and backoffs come out exact."""

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        return start - 1 if stop is None else stop - 1


def make_nodes(logs: dict[int, tuple[int, list[int]]], config: Config = CONFIG) -> dict[int, RaftNode]:
    """Nodes from {id: (term, epochs of their log entries)}; every log value is `e<offset>`."""
    voters = frozenset(logs)
    return {
        i: RaftNode(i, voters, PersistedState(term, None, [Entry(e, f"e{o}") for o, e in enumerate(epochs)]),
                    random.Random(i), 0, config)
        for i, (term, epochs) in logs.items()
    }


def exchange(nodes: dict[int, RaftNode], now_ms: int, cut: frozenset[int] = frozenset()) -> list[Message]:
    """Deliver messages among `nodes` until quiet; messages from or to a node in `cut` are dropped."""
    delivered: list[Message] = []
    pending = [a.message for n in nodes.values() for a in n.drain() if isinstance(a, Send)]
    while pending:
        msg = pending.pop(0)
        if msg.src in cut or msg.dst in cut:
            continue
        delivered.append(msg)
        target = nodes[msg.dst]
        target.on_message(msg, now_ms)
        pending.extend(a.message for a in target.drain() if isinstance(a, Send))
    return delivered


def fetch_round(nodes: dict[int, RaftNode], now_ms: int, cut: frozenset[int] = frozenset()) -> None:
    """Fire every node's timers at `now_ms`, then deliver everything (except to and from `cut`)."""
    for node in nodes.values():
        node.tick(now_ms)
    exchange(nodes, now_ms, cut)


def elect(nodes: dict[int, RaftNode], leader: int, now_ms: int = LATE_MS) -> None:
    """Make `leader` time out first and run its pre-vote and election to completion."""
    nodes[leader].tick(now_ms)
    exchange(nodes, now_ms)


def add_observer(nodes: dict[int, RaftNode], observer: int, seed: int = 0, config: Config = CONFIG) -> RaftNode:
    """Add an empty observer (a node outside the voter set) to `nodes`."""
    voters = frozenset(i for i, n in nodes.items() if not n.is_observer)
    node = nodes[observer] = RaftNode(observer, voters, PersistedState(), random.Random(seed), 0, config)
    return node


def sent(node: RaftNode) -> list[Message]:
    """The messages among `node`'s pending actions (drains them)."""
    return [a.message for a in node.drain() if isinstance(a, Send)]
