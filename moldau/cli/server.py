"""`moldau server`: run a broker.

Configuration comes, in rising precedence, from Kafka-style defaults, an optional properties file, and
`--override key=value` flags (the same names as Kafka's `kafka-server-start.sh ... --override`). With no
arguments the broker listens on 127.0.0.1:9092 and keeps its data in ./data.

Without a properties file the broker starts from `LAPTOP_DEFAULTS` as if they were in one: the values Kafka's
stock config/server.properties sets for a development machine, where Kafka's built-in defaults suit a fleet.

`--add-scram` seeds SCRAM users into a new cluster, as `kafka-storage format --add-scram` does
(`moldau.security.sasl.scram_bootstrap`).

SIGTERM or SIGINT stops the node cleanly, also while it is still starting (a broker waiting for its controllers
waits indefinitely).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from moldau.config import BrokerConfig, ConfigError, load_properties
from moldau.metadata.records import UserScramCredentialRecord
from moldau.security.sasl.scram_bootstrap import ScramSpecError, parse_add_scram

# Kafka's stock server.properties sets these for one developer's broker; built-in defaults stay Kafka's.
# No initial rebalance delay: a single consumer started by hand gets its partitions at once, not after 3 s.
LAPTOP_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config_file", nargs="?", help="a Kafka-style server.properties file")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config, overriding the file (repeatable)",
    )
    parser.add_argument(
        "--add-scram",
        action="append",
        default=[],
        metavar="SPEC",
        help="a SCRAM user to write into a new cluster's metadata log, as kafka-storage format's: "
             "'SCRAM-SHA-256=[name=alice,password=alice-secret]' (repeatable; no effect once the cluster exists)",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = _load_config(args)
        scram_users = [parse_add_scram(spec) for spec in args.add_scram]
    except (ConfigError, ScramSpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency; asyncio's loop still works
        pass
    return asyncio.run(_serve(config, scram_users))


def _load_config(args: argparse.Namespace) -> BrokerConfig:
    props = load_properties(args.config_file) if args.config_file else dict(LAPTOP_DEFAULTS)
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    return BrokerConfig.from_properties(props)


async def _serve(config: BrokerConfig, scram_users: list[UserScramCredentialRecord]) -> int:
    from moldau.server.broker import Broker, StartupError
    from moldau.server.collector import freeze_startup_objects

    broker = Broker(config, bootstrap_scram=scram_users)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # Start-up can wait indefinitely (a broker whose controllers are not up yet): a signal must stop it there too,
    # and so must a failure the node cannot serve past (`Broker.fail`), before start-up ended or after.
    starting = loop.create_task(broker.start())
    ending = loop.create_task(_until_stopped_or_failed(stop, broker.failed))
    await asyncio.wait({starting, ending}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        starting.cancel()
        await asyncio.wait({starting})
        log = logging.getLogger(__name__)
        log.info("stopping before the node had started")
        try:
            await broker.stop()
        except Exception:  # a part that never started may not stop cleanly; the process ends all the same
            log.exception("stopping the node that had not started failed")
            return 1
        return _failed(broker.failure)
    try:
        starting.result()
    except (StartupError, OSError) as exc:
        ending.cancel()
        print(f"error: cannot start broker: {exc}", file=sys.stderr)
        return 1
    freeze_startup_objects()  # before the line below: collections of what start-up made would pause serving
    # Tests and scripts read this line to learn the bound port (the config may say port 0).
    print(f"moldau: listening on {','.join(str(p) for p in broker.bound_ports)}", flush=True)
    await ending
    await broker.stop()
    return _failed(broker.failure)


async def _until_stopped_or_failed(stop: asyncio.Event, failed: asyncio.Event) -> None:
    waits = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(failed.wait())}
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def _failed(failure: str | None) -> int:
    """The exit status: 1, with the reason, when the node stopped because it could not go on."""
    if failure is None:
        return 0
    print(f"error: broker stopped: {failure}", file=sys.stderr)
    return 1
