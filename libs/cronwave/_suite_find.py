"""Which suite a command reaches: one rule for the CLI, ``Client()``, ``cronwave
worker`` and the console.

1. A setting given is used as given: an address variable (``CRONWAVE_STORE_ADDR``,
   ...; ``Client()``'s arguments count as given), ``CRONWAVE_TLS_DIR``,
   ``CRONWAVE_REDIS_URL``.
2. Each other one comes from the running suite recorded in the data dir
   (``suite.json``, see ``cronwave._suite_record``; the embedded Redis's password from
   the file it names, ``cronwave_core.redis_password``): the data dir of ``--data-dir``
   where the command takes one, else ``CRONWAVE_DATA_DIR``, else the per-user default
   (``$XDG_STATE_HOME/cronwave``, else ``~/.local/state/cronwave``). The default does
   not depend on the current folder, so the suite ``cronwave up`` started from one
   folder is the one a command run from any other reaches.
3. No running suite there is ``SuiteNotRunning``, naming the file looked for, how its
   data dir was chosen, and how to start a suite or point to another.

A caller given every setting it needs (the four client addresses; a worker, the
store's address and the Redis URL) reads no data dir unless one was named with
``--data-dir``: a deployment configured through its variables never depends on a
file. Standard library only (``cronwave_core``'s
settings): the light CLI and ``Client()`` use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cronwave import _suite_record
from cronwave_core import redis_password
from cronwave_core.settings_base import PREFIX, user_data_dir

#: What a client needs: the addresses of the services it calls.
CLIENT = ("store", "dispatcher", "planner", "leader")
#: What a worker needs: the store it claims runs from and the Redis of the queues.
WORKER = ("store", "redis")
DATA_DIR_VAR = PREFIX + "DATA_DIR"


def variable(need: str) -> str:
    """The variable that gives ``need`` (``store``: ``CRONWAVE_STORE_ADDR``)."""
    return PREFIX + ("REDIS_URL" if need == "redis" else f"{need.upper()}_ADDR")


@dataclass(frozen=True)
class Found:
    """The suite a caller reaches through a data dir, and the settings it gives."""

    data_dir: Path
    record: _suite_record.SuiteRecord

    def env(self) -> dict[str, str]:
        """The record as the variables that name its settings."""
        extra = self.record.extra
        found = {
            **self.record.env(),
            DATA_DIR_VAR: str(self.data_dir),
            PREFIX + "TLS_DIR": str(extra.get("tls_dir") or self.data_dir / "tls"),
        }
        if extra.get("insecure"):
            found[PREFIX + "INSECURE"] = "1"
        if extra.get("redis_url"):
            found[variable("redis")] = self.redis_url()
        if extra.get("namespace"):
            found[PREFIX + "NAMESPACE"] = str(extra["namespace"])
        return found

    def redis_url(self) -> str:
        """The suite's Redis URL; an embedded Redis's with the password its file in the
        data dir holds (``cronwave_core.redis_password``), unless that file cannot be
        read (``redis_password_error`` says why)."""
        url = str(self.record.extra.get("redis_url") or "")
        kept = self.record.extra.get("redis_password_file")
        if not url or not kept or self.redis_password_error() is not None:
            return url
        return redis_password.with_password(url, redis_password.read_password(Path(str(kept))))

    def redis_password_error(self) -> str | None:
        """Why the suite's Redis password is not known here (None: it is, or its Redis
        has none): a message naming what to do."""
        extra, var = self.record.extra, variable("redis")
        if extra.get("redis_password_file"):
            path = Path(str(extra["redis_password_file"]))
            try:
                redis_password.read_password(path)
            except (OSError, ValueError) as exc:
                return (
                    f"{var}: the suite of {self.data_dir} keeps its Redis's password in "
                    f"{path}, which cannot be read here ({exc}); run as the user that "
                    f"started the suite, or set {var} to that Redis's URL, password "
                    "included"
                )
        elif extra.get("redis_password"):
            return (
                f"{var}: the suite of {self.data_dir} uses a Redis with a password, which "
                f"its suite.json does not keep; set {var} to that Redis's URL, password "
                "included"
            )
        return None

    def under(self, environ: Mapping[str, str], leave: Sequence[str] = ()) -> dict[str, str]:
        """``environ`` over the record's settings but ``leave``: what ``environ`` sets
        (not empty) wins."""
        found = {k: v for k, v in self.env().items() if k not in leave}
        return {**found, **{k: v for k, v in environ.items() if v}}


def data_dir(environ: Mapping[str, str], given: Path | None = None) -> tuple[Path, str]:
    """The data dir a caller looks in, and how it was chosen (``--data-dir``,
    ``CRONWAVE_DATA_DIR`` or ``_suite_record.DEFAULT``)."""
    if given is not None:
        return given.expanduser().resolve(), "--data-dir"
    if environ.get(DATA_DIR_VAR):
        return Path(environ[DATA_DIR_VAR]).expanduser().resolve(), DATA_DIR_VAR
    return user_data_dir(environ), _suite_record.DEFAULT


def find(
    environ: Mapping[str, str], given: Path | None = None, needs: Sequence[str] = CLIENT
) -> Found | None:
    """The running suite whose settings the caller takes, or None when it is given every
    one of ``needs`` (and no ``given`` data dir). Raises ``ConfigurationError`` for a
    malformed address variable, ``SuiteNotRunning`` for a data dir with no running suite
    (see the module docstring)."""
    if given is None and all(environ.get(variable(need)) for need in needs):
        return None
    from cronwave_core.settings import NetworkSettings

    NetworkSettings.from_env(environ)  # a malformed address is named before any lookup
    path, chosen_by = data_dir(environ, given)
    return Found(path, _suite_record.running_suite(path, chosen_by))


def suite_env(
    environ: Mapping[str, str], given: Path | None = None, needs: Sequence[str] = CLIENT
) -> dict[str, str]:
    """``environ`` over the settings of the suite ``find`` finds: what is set (not
    empty) in ``environ`` wins."""
    found = find(environ, given, needs)
    return dict(environ) if found is None else found.under(environ)
