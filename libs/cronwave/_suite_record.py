"""Which suite a data directory holds: its file ``suite.json``.

``cronwave up`` (and ``demo``, and ``load``'s private suite) writes it once every
service of the suite answers, and marks it stopped when the suite has stopped; a
client finds the suite through it (``cronwave._suite_find``: the addresses, the TLS
dir, the Redis URL). The file is replaced atomically (written beside, then renamed),
so a reader sees the old record or the new one, never half of one; it is readable by
its owner only, since a Redis URL may carry a password. A suite whose process died
without marking it (``kill -9``) is told by its pid: a record whose pid is gone is a
stopped suite. Standard library only: the light CLI reads it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cronwave_core.errors import FailedPrecondition, InvalidArgument
from cronwave_core.settings_base import USER_DATA_DIR

FILE = "suite.json"
#: The services a record names, by the setting of each one's address
#: (``store`` is ``CRONWAVE_STORE_ADDR``).
SERVICES = ("store", "leader", "dispatcher", "planner", "worker")


class SuiteNotRunning(FailedPrecondition):
    """The data dir given holds no running suite."""


@dataclass(frozen=True)
class SuiteRecord:
    """A suite's addresses (by setting name, ``HOST:PORT``), the pid of the process
    that runs it, when it started, and whether it has stopped. ``extra`` holds the
    rest a client or a joining worker needs: ``tls_dir`` (or ``insecure``),
    ``redis_url``, ``namespace``."""

    addresses: Mapping[str, str]
    pid: int
    started_at: datetime
    stopped: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.addresses) - set(SERVICES))
        if unknown:
            raise InvalidArgument("addresses", f"unknown services {unknown}; known: {SERVICES}")
        for name, address in self.addresses.items():
            host, sep, port = address.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise InvalidArgument(f"addresses.{name}", f"expected HOST:PORT, got {address!r}")
        if self.pid <= 0:
            raise InvalidArgument("pid", f"must be positive, got {self.pid}")
        if self.started_at.tzinfo is None:
            raise InvalidArgument("started_at", "must be an aware datetime")

    def env(self) -> dict[str, str]:
        """The addresses as the ``CRONWAVE_*_ADDR`` variables that name them."""
        return {f"CRONWAVE_{name.upper()}_ADDR": addr for name, addr in self.addresses.items()}

    def running(self) -> bool:
        """Not marked stopped, and its process is alive."""
        return not self.stopped and _alive(self.pid)

    def to_json(self) -> dict[str, Any]:
        return {
            "addresses": dict(self.addresses),
            "pid": self.pid,
            "started_at": self.started_at.isoformat(),
            "stopped": self.stopped,
            **dict(self.extra),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SuiteRecord:
        """Raises ``InvalidArgument`` naming the field for a record that is not one."""
        known = {"addresses", "pid", "started_at", "stopped"}
        try:
            return cls(
                addresses=dict(data["addresses"]),
                pid=int(data["pid"]),
                started_at=datetime.fromisoformat(str(data["started_at"])),
                stopped=bool(data.get("stopped", False)),
                extra={k: v for k, v in data.items() if k not in known},
            )
        except KeyError as exc:
            raise InvalidArgument(str(exc.args[0]), "required") from exc
        except (TypeError, ValueError) as exc:
            raise InvalidArgument("suite record", f"malformed ({exc})") from exc


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def write(data_dir: Path, record: SuiteRecord) -> Path:
    """Replace ``data_dir``'s record with ``record``, atomically."""
    path = data_dir / FILE
    part = data_dir / f".{FILE}.{os.getpid()}"
    part.unlink(missing_ok=True)  # left by a killed writer that had this pid
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(record.to_json(), indent=2) + "\n")
    os.replace(part, path)
    return path


def read(data_dir: Path) -> SuiteRecord | None:
    """The record in ``data_dir``; None when there is none or it cannot be read."""
    try:
        return SuiteRecord.from_json(json.loads((data_dir / FILE).read_text()))
    except (OSError, ValueError, InvalidArgument):
        return None


def started(data_dir: Path, addresses: Mapping[str, str], **extra: Any) -> SuiteRecord:
    """Record that this process runs a suite at ``addresses`` in ``data_dir``."""
    record = SuiteRecord(dict(addresses), os.getpid(), datetime.now(UTC), extra=extra)
    write(data_dir, record)
    return record


def stopped(data_dir: Path, record: SuiteRecord) -> None:
    """Mark ``record`` stopped, unless the data dir holds another suite's by now."""
    current = read(data_dir)
    if current is not None and (current.pid, current.started_at) == (
        record.pid,
        record.started_at,
    ):
        write(data_dir, replace(record, stopped=True))


#: How a data dir was chosen, as ``running_suite`` is told: the default one, named
#: in its errors by the rule that gives it.
DEFAULT = "default"


def running_suite(data_dir: Path, chosen_by: str = "") -> SuiteRecord:
    """The running suite recorded in ``data_dir``, else ``SuiteNotRunning`` naming the
    file looked for, how that data dir was chosen (``chosen_by``: ``--data-dir``,
    ``CRONWAVE_DATA_DIR``, ``DEFAULT``; empty: not said), what is there, and how to
    start a suite or point to another."""
    record = read(data_dir)
    if chosen_by == DEFAULT:
        where = f"data dir {data_dir} (the default: {USER_DATA_DIR})"
        start = (
            "start one with `cronwave up`, or point to a running one with "
            "--data-dir DIR or CRONWAVE_DATA_DIR"
        )
    else:
        where = f"data dir {data_dir}" + (f" (from {chosen_by})" if chosen_by else "")
        start = f"start one with `cronwave up --data-dir {data_dir}`"
    if record is None:
        if (data_dir / FILE).exists():
            raise SuiteNotRunning(f"{where}: {data_dir / FILE} is not a suite record; {start}")
        raise SuiteNotRunning(
            f"{where}: no cronwave suite was started there (looked for {data_dir / FILE}); {start}"
        )
    if not record.running():
        raise SuiteNotRunning(
            f"{where}: its suite (pid {record.pid}, started "
            f"{record.started_at:%Y-%m-%d %H:%M:%S} UTC, recorded in {data_dir / FILE}) "
            f"is not running any more; {start}"
        )
    return record
