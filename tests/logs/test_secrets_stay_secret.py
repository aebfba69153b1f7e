"""A password in the Redis URL or the database URL, and an API key a caller sends,
never reach a log, a span file, an error or ``cronwave up``'s output: a real
``cronwave up`` runs schedules with planted secrets, then every file it wrote is
searched for them. The embedded Redis of a ``cronwave up`` takes a password of its
own, which only its file in the data dir holds."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import stat
import subprocess
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import pytest
import redis
import sqlalchemy as sa

from cronwave import Client, Interval
from cronwave._suite_record import SuiteRecord
from cronwave._suite_record import read as read_suite_record
from cronwave_core.errors import CronwaveError
from cronwave_core.security.tls import process_tls
from cronwave_core.suite import find_redis_server, free_port
from tests.harness.cli import cronwave_argv, free_port_base, user_env
from tests.harness.processes import ProcessTable
from tests.helpers import eventually

pytestmark = [pytest.mark.slow, pytest.mark.both_backends]

PG_URL = os.environ.get("CRONWAVE_TEST_DATABASE_URL", "")


@pytest.fixture
def planted() -> str:
    """A secret no file could hold by chance."""
    return f"planted{uuid.uuid4().hex}"


@pytest.fixture
def locked_redis(tmp_path: Path, planted: str) -> Iterator[str]:
    """A redis-server of the test's own that takes the planted password, and its URL."""
    port = free_port()
    table = ProcessTable("the test's password-protected redis-server")
    argv = [
        find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--dir", str(tmp_path), "--requirepass", planted,
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    table.track(proc)
    url = f"redis://:{planted}@127.0.0.1:{port}/0"

    def answers() -> bool:
        client = redis.Redis.from_url(url, socket_timeout=1)
        try:
            return bool(client.ping())
        except redis.ConnectionError:  # not listening yet
            return False
        finally:
            client.close()

    def stop() -> None:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)

    try:
        eventually(answers, timeout=20, what="the password-protected redis-server")
        yield url
    finally:
        table.close([stop])


@pytest.fixture
def scheduler_db(backend: str, tmp_path: Path, planted: str) -> Iterator[str]:
    """The suite's database URL: a SQLite file, or a fresh PostgreSQL database reached
    with the planted password (the server's trust authentication accepts any)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'cronwave.db'}"
        return
    admin = sa.make_url(PG_URL).set(drivername="postgresql+psycopg")
    name = f"cw_secret_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin.set(database=name, password=planted).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


def files_under(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


def test_planted_passwords_and_keys_appear_nowhere(
    tmp_path: Path, planted: str, locked_redis: str, scheduler_db: str
) -> None:
    # Given `cronwave up` with a password in its Redis URL (and in its PostgreSQL URL)
    data_dir, output = tmp_path / "up", tmp_path / "up.out"
    up, table, stop_up = _start_up(
        data_dir,
        output,
        {"CRONWAVE_REDIS_URL": locked_redis, "CRONWAVE_DATABASE_URL": scheduler_db},
    )
    try:
        eventually(
            lambda: "cronwave is up" in output.read_text(errors="replace"),
            timeout=120,
            what="cronwave up started",
        )
        addresses = _client_addresses(data_dir)
        # When schedules fire and are triggered, one of them failing
        every, failing = f"every-{uuid.uuid4().hex[:6]}", f"fail-{uuid.uuid4().hex[:6]}"
        with Client(**addresses, timeout=timedelta(seconds=10)) as client:
            client.create_schedule(
                every, intervals=[Interval(timedelta(seconds=1))], job_type="cronwave.noop"
            )
            client.create_schedule(
                failing, cron="0 2 * * *", job_type="cronwave.fail", payload={"message": "no"}
            )
            failed = client.trigger(failing)

            def two_succeeded() -> bool:
                runs = client.list_runs(every, limit=10)
                return sum(r.state == "SUCCEEDED" for r in runs) >= 2

            eventually(two_succeeded, timeout=60, what="two fired runs succeeded")
            client.wait_run(failed.run_id, timeout=timedelta(seconds=60))
        # and a caller sends an API key that carries the planted secret
        key = f"cwk_{planted}"
        tls = dataclasses.replace(process_tls(), identity="client", token=key)
        tls = dataclasses.replace(
            tls, cert=tls.tls_dir / "client.pem", key=tls.tls_dir / "client-key.pem"
        )
        stranger = Client(**addresses, timeout=timedelta(seconds=10), tls=tls)
        with stranger, pytest.raises((CronwaveError, grpc.RpcError)) as refused:
            stranger.list_schedules()
        assert planted not in str(refused.value)
    finally:
        table.close([stop_up])

    # Then no log, span file or other file of the suite, and not `up`'s output, holds it
    assert up.returncode == 0, output.read_text(errors="replace")[-3000:]
    shown = output.read_text(errors="replace")
    assert "redis://:***@127.0.0.1" in shown  # the URL is shown, masked
    searched = [output, *files_under(data_dir)]
    assert any(path.suffix == ".log" for path in searched)
    assert any("spans" in path.parts for path in searched)
    leaks = [
        str(path.relative_to(tmp_path))
        for path in searched
        if planted.encode() in path.read_bytes()
    ]
    assert not leaks, f"the planted secret is in {leaks}"


def command_lines() -> list[bytes]:
    """The command line of every process this user can see."""
    lines = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                lines.append((proc / "cmdline").read_bytes())
            except OSError:  # gone meanwhile, or not ours to read
                continue
    return lines


def refused_by_redis(url: str) -> bool:
    """Whether the Redis at ``url`` refuses to answer its client for want of a password."""
    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        client.set("cronwave:probe", "1")
    except redis.AuthenticationError:
        return True
    except redis.ResponseError as exc:  # NOAUTH, as an older client reads it
        return "NOAUTH" in str(exc) or "WRONGPASS" in str(exc)
    finally:
        client.close()
    return False


def test_the_embedded_redis_answers_only_the_suites_own_password(tmp_path: Path) -> None:
    # Given `cronwave up` with its embedded Redis (no CRONWAVE_REDIS_URL)
    data_dir, output = tmp_path / "up", tmp_path / "up.out"
    up, table, stop_up = _start_up(data_dir, output, {})
    password_file = data_dir / "redis.password"
    try:
        eventually(
            lambda: "cronwave is up" in output.read_text(errors="replace"),
            timeout=120,
            what="cronwave up started",
        )
        password = password_file.read_text().strip()
        url = _recorded(data_dir).extra["redis_url"]
        port = urlsplit(url).port

        # Then the password it made is kept readable by its owner only
        assert len(password) >= 32
        assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
        # and its Redis refuses a client without it, or with another one
        assert refused_by_redis(url)
        assert refused_by_redis(f"redis://:not-{password}@127.0.0.1:{port}/0")
        with redis.Redis.from_url(f"redis://:{password}@127.0.0.1:{port}/0") as client:
            assert client.ping()
        # and no process's command line shows it
        assert not [line for line in command_lines() if password.encode() in line]

        # When a job runs through the suite (dispatcher, queue, worker, store)
        addresses = _client_addresses(data_dir)
        sid = f"noop-{uuid.uuid4().hex[:6]}"
        with Client(**addresses, timeout=timedelta(seconds=10)) as client:
            client.create_schedule(sid, cron="0 2 * * *", job_type="cronwave.noop", paused=True)
            run = client.wait_run(client.trigger(sid).run_id, timeout=timedelta(seconds=60))

        # Then it succeeded: every client of the suite has the password
        assert run.state == "SUCCEEDED", run.error
        record = json.loads((data_dir / "suite.json").read_text())
    finally:
        table.close([stop_up])

    # and suite.json names the file, not the password
    assert record["redis_url"] == f"redis://127.0.0.1:{port}/0"  # no password in it
    assert record["redis_password_file"] == str(password_file)
    # and no file of the suite but its own, and not `up`'s output, holds the password
    assert up.returncode == 0, output.read_text(errors="replace")[-3000:]
    assert "redis://:***@127.0.0.1" in output.read_text(errors="replace")  # shown, masked
    searched = [output, *files_under(data_dir)]
    assert any(path.suffix == ".log" for path in searched)
    leaks = [
        str(path.relative_to(tmp_path))
        for path in searched
        if path != password_file and password.encode() in path.read_bytes()
    ]
    assert not leaks, f"the embedded Redis's password is in {leaks}"


def _recorded(data_dir: Path) -> SuiteRecord:
    """The suite as `cronwave up` recorded it in its data dir (a port of the base it was
    given may have been taken meanwhile: it picks another then)."""
    record = read_suite_record(data_dir)
    assert record is not None, f"no suite recorded in {data_dir}"
    return record


def _client_addresses(data_dir: Path) -> dict[str, str]:
    """The recorded addresses as ``Client`` takes them."""
    addresses = _recorded(data_dir).addresses
    return {f"{hop}_addr": addresses[hop] for hop in ("store", "leader", "dispatcher", "planner")}


def _start_up(
    data_dir: Path, output: Path, extra_env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], ProcessTable, Callable[[], None]]:
    """`cronwave up` on a free port base with the tests' CA, a namespace of its own and
    ``extra_env``, its output in ``output``: (process, its table, its stop)."""
    base = free_port_base()
    env = user_env()
    env |= {
        "CRONWAVE_TLS_DIR": os.environ["CRONWAVE_TLS_DIR"],  # the tests' CA
        "CRONWAVE_NAMESPACE": f"cws{uuid.uuid4().hex[:8]}",
        **extra_env,
    }
    table = ProcessTable("cronwave up")
    with output.open("wb") as out:
        up = subprocess.Popen(
            [*cronwave_argv(), "up", "--data-dir", str(data_dir), "--port-base", str(base)],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    table.track(up)

    def stop_up() -> None:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            up.wait(timeout=60)

    return up, table, stop_up
