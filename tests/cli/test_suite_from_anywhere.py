"""Every entry point reaches the same suite whatever the current folder: the running
suite recorded in the data dir (``--data-dir``, else ``CRONWAVE_DATA_DIR``, else the
per-user ``$XDG_STATE_HOME/cronwave``). ``cronwave status`` run from another folder,
``Client()`` given only ``CRONWAVE_DATA_DIR``, and a second ``cronwave worker
--data-dir D`` all reach a ``cronwave up --port-base N`` suite; where none is found,
the error names the file it looked for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

import cronwave
from cronwave import _suite_find, _suite_record
from cronwave_core import redis_password
from cronwave_core.settings import ProcessSettings
from cronwave_server.cli.worker_cmd import joining_line
from tests.harness.cli import cronwave_argv, free_port_base, user_env
from tests.harness.processes import ProcessTable
from tests.helpers import eventually, fresh

BIN = Path(sys.executable).parent
JOB_MODULE = """
from datetime import timedelta

import cronwave


@cronwave.job({name!r}, duration_limit=timedelta(minutes=1), queue={queue!r})
def joined(ctx: cronwave.JobContext) -> dict:
    return {{"job": {name!r}}}
"""


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a shell with no cronwave variable (not the tests' CA)."""
    env = user_env()
    return {**env, **extra}


@dataclass(frozen=True)
class UpSuite:
    """A ``cronwave up --port-base N`` in the default data dir of ``state_home``."""

    state_home: Path
    data_dir: Path
    base: int
    record: _suite_record.SuiteRecord

    def client(self) -> cronwave.Client:
        """A client told everything: the test's own view, not the rule under test."""
        from cronwave_core.settings import TlsSettings

        tls = TlsSettings.from_env({"CRONWAVE_TLS_DIR": str(self.data_dir / "tls")})
        addrs = self.record.addresses
        return cronwave.Client(
            store_addr=addrs["store"],
            dispatcher_addr=addrs["dispatcher"],
            planner_addr=addrs["planner"],
            leader_addr=addrs["leader"],
            timeout=timedelta(seconds=10),
            tls=tls,
        )


@pytest.fixture(scope="module")
def up_suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpSuite]:
    """``cronwave up --port-base N`` with no ``--data-dir``: in the per-user default."""
    root = tmp_path_factory.mktemp("anywhere")
    state_home = root / "state"
    data_dir = state_home / "cronwave"
    base = free_port_base()
    table = ProcessTable("cronwave up and its suite")
    with (root / "up.log").open("wb") as log:
        up = table.spawn(
            [*cronwave_argv(), "up", "--port-base", str(base)],
            cwd=root,
            stdout=log,
            stderr=log,
            env=clean_env(XDG_STATE_HOME=str(state_home), CRONWAVE_GRACE="2"),
        )

    def stop() -> None:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            up.wait(timeout=60)

    try:

        def recorded() -> _suite_record.SuiteRecord | None:
            found = _suite_record.read(data_dir)
            assert up.poll() is None, (root / "up.log").read_text()
            return found if found is not None and found.running() else None

        record = eventually(recorded, timeout=180, what="`cronwave up` recorded its suite")
        yield UpSuite(state_home, data_dir, base, record)
    finally:
        table.close([stop])


def elsewhere(tmp_path: Path) -> Path:
    folder = tmp_path / "somewhere" / "else"
    folder.mkdir(parents=True)
    return folder


@pytest.mark.slow
def test_status_run_from_another_folder_reaches_the_suite_of_the_default_data_dir(
    up_suite: UpSuite, tmp_path: Path
) -> None:
    # Given a schedule on the suite `cronwave up --port-base N` started in another folder
    sid = fresh("anywhere")
    with up_suite.client() as client:
        client.create_schedule(sid, cron="0 2 * * *", job_type="cronwave.noop", paused=True)

    # When `cronwave status` runs from a folder with no .cronwave, no variable set
    done = subprocess.run(
        [str(BIN / "cronwave"), "status"],
        cwd=elsewhere(tmp_path),
        env=clean_env(XDG_STATE_HOME=str(up_suite.state_home)),
        capture_output=True,
        text=True,
        timeout=60,
    )

    # Then it reached that suite, on its recorded ports
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert sid in done.stdout
    assert up_suite.record.addresses["store"] == f"127.0.0.1:{up_suite.base}"


@pytest.mark.slow
def test_a_client_given_only_the_data_dir_dials_the_suites_recorded_ports(
    up_suite: UpSuite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given only CRONWAVE_DATA_DIR (the default data dir is elsewhere, and empty)
    for name in [k for k in os.environ if k.startswith("CRONWAVE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "empty"))
    monkeypatch.setenv("CRONWAVE_DATA_DIR", str(up_suite.data_dir))
    monkeypatch.chdir(elsewhere(tmp_path))
    sid = fresh("sdk")

    # When Client() is made with no arguments and used
    with cronwave.Client() as client:
        shown = repr(client)
        client.create_schedule(sid, cron="0 2 * * *", job_type="cronwave.noop", paused=True)
        listed = [s.schedule_id for s in client.list_schedules()]
        leader = client.leader()

    # Then it dialled the --port-base suite's recorded ports, with its certificates
    assert shown == f"Client(store_addr='127.0.0.1:{up_suite.base}', ...)"
    assert sid in listed
    assert isinstance(leader, cronwave.Lease)


@pytest.mark.slow
def test_a_second_worker_joins_a_port_base_suite_through_its_data_dir_and_runs_its_jobs(
    up_suite: UpSuite, tmp_path: Path
) -> None:
    # Given a job module on a queue only the joining worker consumes
    code = tmp_path / "code"
    code.mkdir()
    suffix = fresh("j").replace("-", "_")
    module, job, queue = f"joined_{suffix}", f"test.joined_{suffix}", f"joined_{suffix}"
    (code / f"{module}.py").write_text(JOB_MODULE.format(name=job, queue=queue))
    # and the suite's record, which carries its Redis, and where its password is kept
    assert up_suite.record.extra["redis_url"] == f"redis://127.0.0.1:{up_suite.base + 5}/0"
    password_file = up_suite.data_dir / redis_password.FILE
    assert up_suite.record.extra["redis_password_file"] == str(password_file)

    # When `cronwave worker --data-dir D --jobs M` starts from another folder, with no
    # cronwave variable and another default data dir
    table = ProcessTable("the joining worker")
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = table.spawn(
            [str(BIN / "cronwave"), "worker", "--data-dir", str(up_suite.data_dir),
             "--jobs", module, "--queues", queue],
            cwd=elsewhere(tmp_path),
            env=clean_env(
                PYTHONPATH=os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")])),
                XDG_STATE_HOME=str(tmp_path / "empty"),
                CRONWAVE_WORKER_ID="joined-worker",
                CRONWAVE_GRACE="2",
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip

    def stop() -> None:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)

    try:
        with up_suite.client() as client:

            def registered() -> bool:
                assert worker.poll() is None, log_path.read_text()
                return job in client._job_type_names()

            eventually(registered, timeout=90, what="the joining worker's job type registered")
            sid = fresh("joined")
            client.create_schedule(sid, cron="0 2 * * *", job_type=job, paused=True)
            run = client.wait_run(client.trigger(sid).run_id, timeout=timedelta(seconds=60))

        # Then the run SUCCEEDED on the joining worker, which said what it joined: the
        # embedded Redis, with the password it read from the data dir (shown masked)
        assert run.state == "SUCCEEDED", (run.error, log_path.read_text())
        assert run.worker_id == "joined-worker"
        assert run.result == {"job": job}
        redis = f"redis://:***@127.0.0.1:{up_suite.base + 5}/0"
        joined = f"joining the suite of {up_suite.data_dir} (pid {up_suite.record.pid})"
        assert f"{joined}: store 127.0.0.1:{up_suite.base}, redis {redis}" in log_path.read_text()
        assert password_file.read_text().strip() not in log_path.read_text()
        stop()
        assert worker.returncode == 0, log_path.read_text()
    finally:
        table.close([stop])


def test_what_a_joining_worker_prints_masks_the_redis_password(tmp_path: Path) -> None:
    record = _suite_record.started(
        tmp_path,
        {"store": "127.0.0.1:7501"},
        tls_dir=str(tmp_path / "tls"),
        redis_url="redis://:hunter22@127.0.0.1:7505/0",
    )
    found = _suite_find.Found(tmp_path, record)

    line = joining_line(found.under({}), found)

    assert "hunter22" not in line
    assert "redis redis://:***@127.0.0.1:7505/0" in line
    assert "store 127.0.0.1:7501" in line


def test_a_joining_worker_takes_the_embedded_redis_password_from_its_file(
    tmp_path: Path,
) -> None:
    # Given a suite record naming the file that keeps its embedded Redis's password
    password_file = redis_password.keep(tmp_path, "s3cret-pw")
    record = _suite_record.started(
        tmp_path,
        {"store": "127.0.0.1:7501"},
        tls_dir=str(tmp_path / "tls"),
        redis_url="redis://127.0.0.1:7505/0",
        redis_password_file=str(password_file),
    )
    found = _suite_find.Found(tmp_path, record)

    # Then a worker joining it reaches that Redis with the password of the file
    assert found.redis_password_error() is None
    assert found.under({})["CRONWAVE_REDIS_URL"] == "redis://:s3cret-pw@127.0.0.1:7505/0"
    assert "s3cret-pw" not in (tmp_path / _suite_record.FILE).read_text()

    # When the file cannot be read
    password_file.unlink()

    # Then it is told which file, and what to do instead
    error = found.redis_password_error()
    assert error is not None
    assert str(password_file) in error
    assert "set CRONWAVE_REDIS_URL" in error
    assert found.under({})["CRONWAVE_REDIS_URL"] == "redis://127.0.0.1:7505/0"


def test_the_default_data_dir_is_per_user_whatever_the_folder(tmp_path: Path) -> None:
    state = ProcessSettings.from_env({"XDG_STATE_HOME": str(tmp_path / "s")})
    home = ProcessSettings.from_env({"HOME": str(tmp_path / "h"), "XDG_STATE_HOME": "rel"})
    given = ProcessSettings.from_env({"CRONWAVE_DATA_DIR": str(tmp_path / "d")})

    assert state.data_dir == tmp_path / "s" / "cronwave"
    # A relative XDG_STATE_HOME is ignored, as the XDG spec says
    assert home.data_dir == tmp_path / "h" / ".local" / "state" / "cronwave"
    assert given.data_dir == tmp_path / "d"


def no_suite_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    state_home = tmp_path / "state"
    return clean_env(XDG_STATE_HOME=str(state_home)), state_home / "cronwave" / "suite.json"


def test_status_with_no_suite_anywhere_says_where_it_looked(tmp_path: Path) -> None:
    env, looked = no_suite_env(tmp_path)

    done = subprocess.run(
        [str(BIN / "cronwave"), "status"],
        cwd=elsewhere(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: "), done.stderr
    message = " ".join(done.stderr.split())  # unwrapped
    assert f"looked for {looked}" in message
    assert "the default: $XDG_STATE_HOME/cronwave, else ~/.local/state/cronwave" in message
    assert "start one with `cronwave up`" in message
    assert "--data-dir DIR or CRONWAVE_DATA_DIR" in message
    assert "Traceback" not in done.stdout + done.stderr


def test_a_client_with_no_suite_in_its_data_dir_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [k for k in os.environ if k.startswith("CRONWAVE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CRONWAVE_DATA_DIR", str(tmp_path / "d"))

    with pytest.raises(cronwave.FailedPrecondition) as caught:
        cronwave.Client()

    assert "(from CRONWAVE_DATA_DIR)" in caught.value.message
    assert f"looked for {tmp_path / 'd' / 'suite.json'}" in caught.value.message


def test_a_client_given_only_the_store_says_where_it_looked_for_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given only the store's address, and no suite in the default data dir
    for name in [k for k in os.environ if k.startswith("CRONWAVE_") and k.endswith("_ADDR")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("CRONWAVE_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))

    client = cronwave.Client(store_addr="127.0.0.1:1", timeout=timedelta(seconds=1))

    # When it calls the dispatcher, which it has no address for
    with client, pytest.raises(cronwave.FailedPrecondition) as caught:
        client.trigger("nightly-billing")

    # Then the error names the variable and the file it looked for; nothing was dialled
    assert caught.value.message.startswith(
        "no address for the dispatcher: CRONWAVE_DISPATCHER_ADDR unset, and data dir "
    )
    assert f"looked for {tmp_path / 'cronwave' / 'suite.json'}" in caught.value.message


@pytest.mark.slow
def test_a_worker_with_no_suite_says_where_it_looked_before_starting(tmp_path: Path) -> None:
    env, looked = no_suite_env(tmp_path)

    done = subprocess.run(
        [str(BIN / "cronwave"), "worker"],
        cwd=elsewhere(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )

    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"looked for {looked}" in " ".join(done.stderr.split())
