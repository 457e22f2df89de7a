"""What ACL checks cost: produce throughput on a broker with `authorizer.class.name` set and 1,000 ACLs, as a
ratio to the same broker without an authorizer.

The ACL broker holds ACLS ACLs (default 1,000): literal and prefixed ACLs on other topics for other principals,
DENYs among them, plus the few that let `User:ANONYMOUS` (every PLAINTEXT client) manage ACLs and write the
benchmark topics. kcat produces N 1 KB records (linger.ms=5, batch.size=1 MB) into a fresh 1-partition topic on
each broker, REPEAT times with the order alternating; the medians and their ratio are printed. Both brokers run
in the same session, so machine noise falls on both sides. Every run is read back and counted.

Run from the repository root:  python -m bench.acls [--quick] [--records N] [--acls N] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from bench.common import (
    alternating,
    create_topic,
    kcat_version,
    line_files,
    run_timed,
    running_broker,
    unique_topic,
    verify_count,
)

RECORD_BYTES = 1000
ANONYMOUS = "User:ANONYMOUS"
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # Until the first ACL exists nothing would be allowed; with this the set-up below may create them.
    "allow.everyone.if.no.acl.found": "true",
}


def _allow(rtype: ResourceType, name: str, pattern: ResourcePatternType, op: AclOperation) -> AclBinding:
    return AclBinding(rtype, name, pattern, ANONYMOUS, "*", op, AclPermissionType.ALLOW)


def install_acls(bootstrap: str, total: int) -> None:
    """`total` ACLs: the benchmark's own, then others for other principals and topics."""
    prefixed, literal = ResourcePatternType.PREFIXED, ResourcePatternType.LITERAL
    own = [
        _allow(ResourceType.BROKER, "kafka-cluster", literal, AclOperation.ALTER),
        _allow(ResourceType.BROKER, "kafka-cluster", literal, AclOperation.DESCRIBE),
        _allow(ResourceType.TOPIC, "acls-", prefixed, AclOperation.ALL),
        _allow(ResourceType.GROUP, "*", literal, AclOperation.ALL),
    ]
    others = []
    for i in range(total - len(own)):
        permission = AclPermissionType.DENY if i % 10 == 0 else AclPermissionType.ALLOW
        pattern = prefixed if i % 3 == 0 else literal
        others.append(AclBinding(ResourceType.TOPIC, f"app-{i}", pattern, f"User:user-{i % 50}", "*",
                                 AclOperation.WRITE if i % 2 else AclOperation.READ, permission))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for batch in (own[:1], own[1:] + others):  # ALTER on the cluster first: it keeps the rest allowed
        for future in admin.create_acls(batch, request_timeout=60).values():
            future.result(timeout=60)


def check_microseconds(total: int) -> tuple[float, float]:
    """In process: µs per authorization check against `total` ACLs like the broker's, memoised and not."""
    import time
    import uuid

    from moldau.security.acl import model
    from moldau.security.acl.authorizer import Authorizer

    acls = {uuid.uuid4(): model.AclBinding(model.ResourceType.TOPIC, f"app-{i}",
                                           model.PatternType.PREFIXED if i % 3 == 0 else model.PatternType.LITERAL,
                                           f"User:user-{i % 50}", "*", model.AclOperation.WRITE,
                                           model.AclPermissionType.ALLOW) for i in range(total)}
    acls[uuid.uuid4()] = model.AclBinding(model.ResourceType.TOPIC, "acls-", model.PatternType.PREFIXED, ANONYMOUS,
                                          "*", model.AclOperation.ALL, model.AclPermissionType.ALLOW)
    authorizer, n = Authorizer(), 100_000
    args = (ANONYMOUS, "127.0.0.1", model.AclOperation.WRITE, model.ResourceType.TOPIC)
    start = time.perf_counter()
    for _ in range(n):
        authorizer.authorize(acls, args[0], args[1], args[2], args[3], "acls-bench-1")
    memoised = (time.perf_counter() - start) / n * 1e6
    start = time.perf_counter()
    for i in range(n // 10):
        authorizer.authorize(acls, args[0], args[1], args[2], args[3], f"acls-bench-{i}-x")
    fresh = (time.perf_counter() - start) / (n // 10) * 1e6
    return memoised, fresh


def produce_seconds(bootstrap: str, lines: Path, count: int) -> float:
    topic = unique_topic("acls-bench")
    create_topic(bootstrap, topic, 1)
    seconds, _ = run_timed(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-l", "-X", "linger.ms=5",
                            "-X", "batch.size=1000000", "-X", "compression.codec=none", "-z", "none",
                            str(lines)], timeout=300)
    verify_count(bootstrap, topic, count, timeout=120)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer records and repeats")
    parser.add_argument("--records", type=int, help="records per run (default 200000, quick 50000)")
    parser.add_argument("--acls", type=int, default=1000, help="ACLs on the authorizing broker")
    parser.add_argument("--repeat", type=int, help="alternating runs per side (default 3, quick 1)")
    args = parser.parse_args()
    count = args.records or (50_000 if args.quick else 200_000)
    repeat = args.repeat or (1 if args.quick else 3)
    print(f"# ACL check cost, {count} records of {RECORD_BYTES} B, {args.acls} ACLs, kcat {kcat_version()}")
    memoised, fresh = check_microseconds(args.acls)
    print(f"one check in process: {memoised:.2f} µs memoised, {fresh:.2f} µs for a topic not seen before")
    with (
        line_files("acls", {RECORD_BYTES: count}) as files,
        running_broker("no authorizer", "moldau") as plain,
        running_broker("ACLs", "moldau", overrides=AUTHORIZER) as secured,
    ):
        install_acls(secured.bootstrap, args.acls)
        seconds: dict[str, list[float]] = {"plain": [], "acls": []}
        for _, side in alternating(("plain", "acls"), repeat):
            broker = plain if side == "plain" else secured
            seconds[side].append(produce_seconds(broker.bootstrap, files[RECORD_BYTES], count))
        rate_plain = count / statistics.median(seconds["plain"])
        rate_acls = count / statistics.median(seconds["acls"])
        print(f"{'no authorizer rec/s':>20} {'ACLs rec/s':>12} {'ratio':>6}")
        print(f"{rate_plain:20,.0f} {rate_acls:12,.0f} {rate_acls / rate_plain:6.2f}", flush=True)


if __name__ == "__main__":
    main()
