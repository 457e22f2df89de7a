"""A throwaway PostgreSQL server for tests: its own data directory, a free loopback port, trust auth,
`wal_level=logical`. One server serves the whole run (the `postgres` fixture in tests/conftest.py); tests
create their own databases on it (`create_database`).

PostgreSQL refuses to run as root, so under root the server runs as the `postgres` user that Debian's
package creates.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from moldau.net.ports import free_port


def postgres_binary(name: str) -> str:
    """`initdb`, `postgres`...: from PATH, else from Debian's versioned directory."""
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if found is None:
        raise RuntimeError(f"PostgreSQL's {name} not found (Debian package: postgresql)")
    return found


class PostgresServer:
    """`start()` it, use `url`, then `stop()` it (which also removes its data)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="moldau-pg-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _as_owner(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def start(self, timeout_s: float = 60.0) -> None:
        data = self.root / "data"
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        subprocess.run([*self._as_owner(), postgres_binary("initdb"), "-D", str(data), "-A", "trust", "-U",
                        "postgres", "--no-sync"], check=True, capture_output=True, timeout=timeout_s)
        log = open(self.root / "server.log", "wb")  # noqa: SIM115 - the child process owns it
        self.proc = subprocess.Popen(
            [*self._as_owner(), postgres_binary("postgres"), "-D", str(data), "-p", str(self.port),
             "-k", str(self.root), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
             # Logical replication for Connect's change capture; slots and senders for several connectors at once.
             "-c", "wal_level=logical", "-c", "max_replication_slots=20", "-c", "max_wal_senders=20"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready = subprocess.run(["psql", self.url, "-Atc", "select 1"], capture_output=True, timeout=10)
            if ready.returncode == 0:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"PostgreSQL did not start:\n{(self.root / 'server.log').read_text(errors='replace')}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # smart shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.root, ignore_errors=True)


    def create_database(self, name: str) -> str:
        """A new empty database `name` on this server; its URL."""
        subprocess.run(["psql", self.url, "-Atc", f'create database "{name}"'], check=True, capture_output=True,
                       timeout=60)
        return self.url.rsplit("/", 1)[0] + f"/{name}"
