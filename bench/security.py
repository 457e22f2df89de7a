"""The cost of TLS and SASL: produce and consume throughput over SSL and SASL_SSL (SCRAM-SHA-256) as ratios to
PLAINTEXT, measured in the same run.

One Moldau broker serves a PLAINTEXT, an SSL and a SASL_SSL listener at once (certificates made for the run with
trustme, in a temporary directory; the SCRAM user made through AdminClient). For each round, in an order rotated
each round, kcat (C, librdkafka, the same build the
Python clients use) produces a pre-generated file of N records of SIZE bytes (``kcat -P -l``, linger.ms=5,
batch.size=1000000, acks=1, no compression) into a fresh 1-partition topic through one listener, then reads all
of it back through the same listener (``kcat -C -e``); each is timed from process start to exit, and a read that
does not return every record fails the run. The table gives the median MB/s of each protocol and its ratio to
PLAINTEXT. SCRAM authenticates each connection once, so SASL_SSL should cost what SSL costs.

Run from the repository root:  python -m bench.security [--mb 100] [--size 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from collections.abc import Iterator
from pathlib import Path

from bench.common import (
    create_topic,
    delete_topic,
    kcat_version,
    run_timed,
    scratch_dir,
    server_with,
    unique_topic,
    write_lines,
)
from moldau.net.ports import free_ports
from tests.support.sasl import JAAS, create_scram_users
from tests.support.tls import Pki, make_pki

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
SCRAM_USER = ("bench", "bench-secret")
BATCHING = ["-X", "linger.ms=5", "-X", "batch.size=1000000", "-X", "compression.codec=none", "-z", "none"]


@contextlib.contextmanager
def secured_broker(tmp: Path, pki: Pki) -> Iterator[dict[str, str]]:
    """A broker with PLAINTEXT, SSL and SASL_SSL listeners; yields each protocol's bootstrap address."""
    plain, tls, sasl_ssl = free_ports(3)
    overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls},SASL_SSL://127.0.0.1:{sasl_ssl}",
                 "log.dirs": str(tmp / "data"), "node.id": "1", **pki.broker_config("none"),
                 "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                 "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
                 "schema.registry.listeners": "", "console.listeners": ""}  # their default ports may be taken
    with server_with(overrides, tmp, plain):
        create_scram_users(f"127.0.0.1:{sasl_ssl}", {"SCRAM-SHA-256": SCRAM_USER}, "SASL_SSL", str(pki.ca))
        yield {"PLAINTEXT": f"127.0.0.1:{plain}", "SSL": f"127.0.0.1:{tls}", "SASL_SSL": f"127.0.0.1:{sasl_ssl}"}


def client_options(protocol: str, pki: Pki) -> list[str]:
    if protocol == "PLAINTEXT":
        return []
    tls = ["-X", f"security.protocol={protocol.lower()}", "-X", f"ssl.ca.location={pki.ca}"]
    if protocol == "SSL":
        return tls
    user, password = SCRAM_USER
    return [*tls, "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", f"sasl.username={user}",
            "-X", f"sasl.password={password}"]


def one_round(addresses: dict[str, str], protocol: str, pki: Pki, lines: Path, count: int, size: int,
              timeout: float) -> tuple[float, float]:
    """(produce MB/s, consume MB/s) of one protocol."""
    bootstrap = addresses[protocol]
    topic = unique_topic(f"tls-{protocol.lower()}")
    create_topic(addresses["PLAINTEXT"], topic, 1)
    try:
        options = client_options(protocol, pki)
        produced_s, _ = run_timed(["kcat", "-P", "-b", bootstrap, "-t", topic, "-l", *BATCHING,
                                   "-X", "acks=1", *options, str(lines)], timeout)
        consumed_s, out = run_timed(["kcat", "-C", "-q", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e",
                                     "-f", ".", *options], timeout)
        if len(out) != count:
            raise RuntimeError(f"{protocol}: read back {len(out)} of {count} records")
        megabytes = count * size / 1e6
        return megabytes / produced_s, megabytes / consumed_s
    finally:
        delete_topic(addresses["PLAINTEXT"], topic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mb", type=int, default=100, help="MB of record values per run (default 100)")
    parser.add_argument("--size", type=int, default=1000, help="record size in bytes (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per protocol; the median counts")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds allowed per kcat run")
    args = parser.parse_args()
    count = args.mb * 1_000_000 // args.size
    print(f"# {kcat_version()}; {count} records of {args.size} B per run, {args.rounds} rounds", flush=True)
    results: dict[str, list[tuple[float, float]]] = {p: [] for p in PROTOCOLS}
    with scratch_dir("security") as tmp:
        pki = make_pki(tmp / "pki")
        lines = tmp / "lines"
        write_lines(lines, args.size, count)
        with secured_broker(tmp, pki) as addresses:
            for round_number in range(args.rounds):
                shift = round_number % len(PROTOCOLS)
                order = PROTOCOLS[shift:] + PROTOCOLS[:shift]
                for protocol in order:
                    produce, consume = one_round(addresses, protocol, pki, lines, count, args.size,
                                                 args.time_limit)
                    results[protocol].append((produce, consume))
                    print(f"# round {round_number + 1} {protocol}: produce {produce:.1f} MB/s, "
                          f"consume {consume:.1f} MB/s", flush=True)
    medians = {p: (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
               for p, runs in results.items()}
    print("| protocol | produce MB/s | consume MB/s | produce vs PLAINTEXT | consume vs PLAINTEXT |")
    print("|---|---|---|---|---|")
    base_produce, base_consume = medians["PLAINTEXT"]
    for protocol, (produce, consume) in medians.items():
        print(f"| {protocol} | {produce:.1f} | {consume:.1f} | {produce / base_produce:.2f} | "
              f"{consume / base_consume:.2f} |")


if __name__ == "__main__":
    main()
