"""A throwaway PostgreSQL server for the JDBC and change data capture tests: initdb into a temporary
directory, start on a random port, stop and delete at the end.

Why not a shared server: the tests must run on a fresh CI machine with nothing but the Debian packages
(``make test`` installs ``postgresql`` and ``libpostgresql-jdbc-java`` when missing). PostgreSQL refuses
to run as root, so under root the server runs as the ``postgres`` user (or ``nobody``) in a directory it
owns under /tmp; pytest's own temporary directories are mode 0700 and other users cannot enter them.
A server that cannot start is a test failure with its log in the message, never a silent skip: a JDBC
test that skipped on CI would prove nothing.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kconnect.runtime.cli.broker import free_port

USER = "kconnect"
PASSWORD = "kconnect-secret"
DATABASE = "postgres"
#: Where Debian's libpostgresql-jdbc-java puts the driver.
DRIVER_JAR = "/usr/share/java/postgresql.jar"


def server_bin(name: str) -> str:
    """A server binary: PATH first, then Debian's versioned directories (newest last wins)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    on_path = shutil.which(name)
    if on_path:
        return on_path
    raise RuntimeError(
        f"PostgreSQL's {name} is not installed (Debian: apt-get install -y postgresql; `make test` does it)"
    )


def _run_as() -> str | None:
    """The user to run the server as: None (ourselves) unless we are root, which postgres refuses."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a postgres nor a nobody user exists to run PostgreSQL")


@dataclass
class PostgresServer:
    directory: Path
    port: int
    user: str | None

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{DATABASE}"

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.user, "--", *args] if self.user else list(args)

    def psql(self, sql: str) -> list[list[str]]:
        """Rows of a query as lists of text (unaligned, '|' separated); raises with psql's error."""
        result = subprocess.run(
            [
                shutil.which("psql") or server_bin("psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                USER,
                "-d",
                DATABASE,
                "-v",
                "ON_ERROR_STOP=1",
                "-At",
                "-c",
                sql,
            ],
            env={**os.environ, "PGPASSWORD": PASSWORD},
            capture_output=True,
            text=True,
            timeout=30,
        )
        if result.returncode != 0:
            raise RuntimeError(f"psql failed on {sql!r}: {result.stderr.strip()}")
        return [line.split("|") for line in result.stdout.splitlines() if line]

    def restart(self) -> None:
        """pg_ctl restart -m fast: every connection (walsenders too) is closed, and the server comes back on
        the same port with the options it was started with (pg_ctl reuses postmaster.opts)."""
        data = str(self.directory / "data")
        log = str(self.directory / "server.log")
        result = subprocess.run(
            self._cmd(server_bin("pg_ctl"), "restart", "-w", "-t", "60", "-m", "fast", "-D", data, "-l", log),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl restart exited {result.returncode}: {result.stdout}{result.stderr}")

    def stop(self) -> None:
        subprocess.run(
            self._cmd(server_bin("pg_ctl"), "stop", "-D", str(self.directory / "data"), "-m", "immediate"),
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.directory, ignore_errors=True)


def start_postgres(logical: bool = False) -> PostgresServer:
    """initdb + pg_ctl start (waits until it accepts connections); password auth over TCP. ``logical``:
    ``wal_level=logical`` with room for replication slots, for the change data capture tests (initdb's
    pg_hba.conf already lets the superuser open replication connections from 127.0.0.1)."""
    user = _run_as()
    directory = Path(tempfile.mkdtemp(prefix="kconnect-pg-"))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(directory, entry.pw_uid, entry.pw_gid)
    server = PostgresServer(directory, free_port(), user)
    pwfile = directory / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if user is not None:
        os.chown(pwfile, pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    steps = [
        server._cmd(
            server_bin("initdb"),
            "-D",
            str(directory / "data"),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "--auth-host=scram-sha-256",
            "--auth-local=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ),
        server._cmd(
            server_bin("pg_ctl"),
            "start",
            "-w",
            "-t",
            "60",
            "-D",
            str(directory / "data"),
            "-l",
            str(directory / "server.log"),
            "-o",
            f"-p {server.port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off"
            + (" -c wal_level=logical -c max_replication_slots=10 -c max_wal_senders=10" if logical else ""),
        ),
    ]
    for step in steps:
        result = subprocess.run(step, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            log = directory / "server.log"
            detail = log.read_text()[-2000:] if log.exists() else ""
            server.stop()
            raise RuntimeError(
                f"could not start PostgreSQL: {' '.join(step)} exited {result.returncode}: "
                f"{result.stdout[-1000:]}{result.stderr[-1000:]}{detail}"
            )
    return server


def cdc_config(port: int, config: dict[str, str]) -> dict[str, str]:
    """A CDC connector's config against a server of this module on ``port``: Debezium's class name (which
    kconnect's PostgresCdcSourceConnector answers to), one task, the credentials, JSON with schemas on both
    converters; ``config`` on top."""
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": "127.0.0.1",
        "database.port": str(port),
        "database.user": USER,
        "database.password": PASSWORD,
        "database.dbname": DATABASE,
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
        **config,
    }


def captured_table(prefix: str, table: str) -> dict[str, str]:
    """The keys that make a CDC connector capture ``public.<table>`` alone, through a slot (``kc_<prefix>``)
    and a publication (``kc_<prefix>_pub``, created for that table) of its own, into topics under
    ``prefix``: so tests sharing one server do not see each other's changes."""
    return {
        "topic.prefix": prefix,
        "slot.name": f"kc_{prefix}",
        "publication.name": f"kc_{prefix}_pub",
        "publication.autocreate.mode": "filtered",
        "table.include.list": f"public\\.{table}",
    }
