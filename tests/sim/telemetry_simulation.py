"""A seeded simulation of client telemetry (KIP-714) on one broker: clients asking for subscriptions and pushing
at their intervals (some early, some with stale ids, some terminating, some restarting without an id), while an
operator adds, changes and removes subscriptions, on a manual clock.

Checked after every step, against a model that knows what each client was told:
- a push is accepted exactly when it carries the client's current subscription id, the client has not
  terminated, and it is not early; an accepted push becomes that client's latest, with its points;
- memory stays bounded (instances, points per push);
- a client matched by no subscription is asked for no metrics.

Replay one seed: `python -m tests.sim.telemetry_simulation --seed N`.
"""

from __future__ import annotations

import argparse
import random
import uuid
from dataclasses import dataclass

from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.telemetry import clients as clients_module
from moldau.telemetry.clients import ClientTelemetry
from moldau.telemetry.subscriptions import RESOURCE_CLIENT_METRICS

MAX_CLIENTS = 6
MAX_POINTS = 3
STEPS = 300


@dataclass
class SimClient:
    client_id: str
    instance_id: uuid.UUID | None = None
    subscription_id: int = 0
    interval_ms: int = 0
    last_push_ms: int | None = None
    terminated: bool = False


def payload(rng: random.Random) -> tuple[bytes, int]:
    data = MetricsData()
    scope = data.resource_metrics.add().scope_metrics.add()
    count = rng.randint(0, 5)
    for i in range(count):
        scope.metrics.add(name=f"m{i}").sum.data_points.add(as_int=i)
    return data.SerializeToString(), count


class TelemetrySimulation:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        ids = random.Random(seed + 1)
        self.telemetry = ClientTelemetry(self.clock, lambda: 1 << 16,
                                         new_instance_id=lambda: uuid.UUID(int=ids.getrandbits(128)))
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.clients = [SimClient(f"app-{i}") for i in range(8)]
        self.stats = {"accepted": 0, "stale": 0, "early": 0, "terminated": 0, "unmatched": 0, "forgotten": 0}

    def fail(self, message: str) -> AssertionError:
        return AssertionError(f"seed {self.seed}: {message}")

    def run(self) -> dict[str, int]:
        old = (clients_module.MAX_CLIENTS, clients_module.MAX_POINTS_PER_PUSH)
        clients_module.MAX_CLIENTS, clients_module.MAX_POINTS_PER_PUSH = MAX_CLIENTS, MAX_POINTS
        try:
            for _ in range(STEPS):
                self.step()
                if len(self.telemetry.clients()) > MAX_CLIENTS:
                    raise self.fail("more client instances kept than the bound")
        finally:
            clients_module.MAX_CLIENTS, clients_module.MAX_POINTS_PER_PUSH = old
        return self.stats

    def step(self) -> None:
        self.clock.advance(self.rng.choice((10, 100, 500, 1000, 3000)))
        roll = self.rng.random()
        if roll < 0.15:
            self.change_subscriptions()
        elif roll < 0.45:
            self.subscribe(self.rng.choice(self.clients))
        else:
            self.push(self.rng.choice(self.clients))

    def change_subscriptions(self) -> None:
        name = f"s{self.rng.randint(0, 2)}"
        if self.rng.random() < 0.3:
            self.configs.pop((RESOURCE_CLIENT_METRICS, name), None)
        else:
            # A new map each time, as the metadata image replaces its configs rather than mutating them.
            self.configs = {**self.configs, (RESOURCE_CLIENT_METRICS, name): {
                "metrics": self.rng.choice(("m", "*", "x.")),
                "interval.ms": str(self.rng.choice((500, 1000, 2000))),
                "match": f"client_id=app-[{self.rng.randint(0, 7)}-7]"}}
        self.configs = dict(self.configs)

    def subscribe(self, client: SimClient) -> None:
        if client.terminated or self.rng.random() < 0.1:
            client.instance_id, client.terminated, client.last_push_ms = None, False, None  # a new client
        if client.instance_id is not None and self.telemetry.latest(client.instance_id) is None:
            client.last_push_ms, client.terminated = None, False  # forgotten (bounded memory): known afresh
        instance = self.telemetry.subscribe(client.instance_id, client.client_id, "127.0.0.1:1000", self.configs)
        if client.instance_id is not None and instance.instance_id != client.instance_id:
            raise self.fail("an instance id the client had was replaced")
        client.instance_id = instance.instance_id
        client.subscription_id = instance.subscription.subscription_id
        client.interval_ms = instance.subscription.interval_ms
        matched = any(self._matches(values, client.client_id) for (_, _), values in self.configs.items())
        if not matched:
            self.stats["unmatched"] += 1
            if instance.subscription.metrics:
                raise self.fail(f"{client.client_id} matches no subscription but was asked for metrics")

    @staticmethod
    def _matches(values: dict[str, str], client_id: str) -> bool:
        import re

        return bool(re.fullmatch(values["match"].split("=", 1)[1], client_id)) and bool(values["metrics"])

    def push(self, client: SimClient) -> None:
        if client.instance_id is None:
            return
        data, count = payload(self.rng)
        terminating = self.rng.random() < 0.05
        known = self.telemetry.latest(client.instance_id)
        now = self.clock.time_ms()
        try:
            self.telemetry.push(client.instance_id, client.subscription_id, terminating, 0, data, self.configs)
        except KafkaError as exc:
            self.expect_refusal(client, known is None, exc.code, now, terminating)
            return
        if known is None or client.terminated:
            raise self.fail(f"a push from {client.client_id} was accepted although forgotten or terminated")
        latest = self.telemetry.latest(client.instance_id)
        assert latest is not None
        if latest.subscription.subscription_id != client.subscription_id:
            raise self.fail("a push with a stale subscription id was accepted")
        if len(latest.points) != min(count, MAX_POINTS) or latest.points_dropped != max(0, count - MAX_POINTS):
            raise self.fail("the latest push does not hold the pushed points, bounded")
        if client.last_push_ms is not None and not terminating and now - client.last_push_ms < client.interval_ms / 2:
            raise self.fail("an early push was accepted")
        client.last_push_ms, client.terminated = now, terminating
        self.stats["accepted"] += 1

    def expect_refusal(self, client: SimClient, forgotten: bool, code: ErrorCode, now: int, terminating: bool) -> None:
        if forgotten:
            self.stats["forgotten"] += 1
            if code != ErrorCode.unknown_subscription_id:
                raise self.fail(f"a forgotten instance got {code.name}")
            client.instance_id, client.last_push_ms, client.terminated = None, None, False
        elif code == ErrorCode.unknown_subscription_id:
            self.stats["stale"] += 1
        elif code == ErrorCode.invalid_request:
            self.stats["terminated"] += 1
            if not client.terminated:
                raise self.fail("a live client's push was refused as terminated")
        elif code == ErrorCode.throttling_quota_exceeded:
            self.stats["early"] += 1
            if terminating or client.last_push_ms is None or now - client.last_push_ms >= client.interval_ms:
                raise self.fail("a push on time was refused as early")
        else:
            raise self.fail(f"unexpected refusal {code.name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, required=True)
    print(TelemetrySimulation(parser.parse_args().seed).run())


if __name__ == "__main__":
    main()
