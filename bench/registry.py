"""Schema registry lookups per second: schemas by id, a subject's latest version, and the lookup of a schema text
(what serializers send before their first record), each as a ratio to `GET /`, the same HTTP stack answering an
empty object, measured in the same run.

One broker with its registry on a free port holds SCHEMAS Avro schemas under as many subjects. CLIENTS threads,
each with its own keep-alive connection (http.client), send requests for SECONDS per kind, the kinds alternating
REPEAT times; medians are printed. The Python client shares the machine's cores with the broker, so absolute
figures are a floor; the ratios say what a lookup costs beyond serving any request at all.

Run from the repository root:  python -m bench.registry [--quick] [--clients N] [--seconds S] [--repeat N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse
from collections.abc import Callable

from bench.common import alternating, running_broker
from moldau.net.ports import free_port

CONTENT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
Request = Callable[[int], tuple[str, str, bytes | None]]  # i -> (method, path, body)


def avro_schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"Event{i}", "namespace": "bench",
                       "fields": [{"name": "id", "type": "long"}, {"name": "source", "type": "string"},
                                  {"name": f"field{i}", "type": ["null", "string"], "default": None}]})


def register_all(url: str, count: int) -> list[int]:
    ids = []
    connection = _connect(url)
    for i in range(count):
        body = json.dumps({"schema": avro_schema(i)}).encode()
        connection.request("POST", f"/subjects/bench-{i}-value/versions", body, CONTENT)
        answer = connection.getresponse()
        payload = json.loads(answer.read())
        assert answer.status == 200, payload
        ids.append(payload["id"])
    return ids


def _connect(url: str) -> http.client.HTTPConnection:
    parts = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)


def requests_per_second(url: str, request: Request, clients: int, seconds: float) -> float:
    """Requests answered 200 per second by `clients` threads sending `request(i)` for `seconds`."""
    counts = [0] * clients
    start = threading.Barrier(clients + 1)
    deadline: list[float] = []

    def client(slot: int) -> None:
        connection = _connect(url)
        start.wait()
        i = slot
        while time.monotonic() < deadline[0]:
            method, path, body = request(i)
            connection.request(method, path, body, CONTENT if body is not None else {})
            answer = connection.getresponse()
            answer.read()
            if answer.status != 200:
                raise RuntimeError(f"{method} {path}: HTTP {answer.status}")
            counts[slot] += 1
            i += clients
        connection.close()

    threads = [threading.Thread(target=client, args=(slot,)) for slot in range(clients)]
    for thread in threads:
        thread.start()
    deadline.append(time.monotonic() + seconds)
    began = time.monotonic()
    start.wait()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.monotonic() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter runs, one repeat")
    parser.add_argument("--schemas", type=int, default=200, help="schemas registered (default 200)")
    parser.add_argument("--clients", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--seconds", type=float, help="seconds per kind and repeat (default 5, quick 2)")
    parser.add_argument("--repeat", type=int, help="alternating rounds (default 3, quick 1)")
    args = parser.parse_args()
    seconds = args.seconds or (2.0 if args.quick else 5.0)
    repeat = args.repeat or (1 if args.quick else 3)
    registry = f"http://127.0.0.1:{free_port()}"
    with running_broker("registry", "moldau", overrides={"schema.registry.listeners": registry}):
        ids = register_all(registry, args.schemas)
        bodies = [json.dumps({"schema": avro_schema(i)}).encode() for i in range(args.schemas)]
        kinds: dict[str, Request] = {
            "GET / (baseline)": lambda i: ("GET", "/", None),
            "GET /schemas/ids/{id}": lambda i: ("GET", f"/schemas/ids/{ids[i % len(ids)]}", None),
            "GET .../versions/latest": lambda i: ("GET", f"/subjects/bench-{i % len(ids)}-value/versions/latest",
                                                  None),
            "POST /subjects/{s} (lookup)": lambda i: ("POST", f"/subjects/bench-{i % len(ids)}-value",
                                                      bodies[i % len(ids)]),
        }
        rates: dict[str, list[float]] = {kind: [] for kind in kinds}
        for _, kind in alternating(list(kinds), repeat):
            rates[kind].append(requests_per_second(registry, kinds[kind], args.clients, seconds))
    print(f"# schema registry lookups, {args.schemas} Avro schemas, {args.clients} clients, {seconds:g} s x "
          f"{repeat}")
    baseline = statistics.median(rates["GET / (baseline)"])
    print(f"{'request':<30} {'requests/s':>11} {'vs GET /':>9}")
    for kind, values in rates.items():
        rate = statistics.median(values)
        print(f"{kind:<30} {rate:11,.0f} {rate / baseline:9.2f}", flush=True)


if __name__ == "__main__":
    main()
