"""What the error tests share: reading whole databases to prove that a refused call
wrote nothing, and spotting internal details in a message a caller sees."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import grpc
import sqlalchemy as sa
from cronwave_proto.v1 import cron_planner_service_pb2 as planner_pb
from cronwave_proto.v1 import cron_planner_service_pb2_grpc as planner_grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from cronwave_core.suite import Suite
from tests.harness.tls import hop_channel
from tests.helpers import eventually

#: What no request may end with: bad input gets a status that names what is wrong.
NEVER = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
REPO = str(Path(__file__).resolve().parents[2])
INTERNALS = (
    "Traceback",
    'File "',
    "sqlalchemy",
    "psycopg",
    "sqlite3",
    "SELECT ",
    "INSERT ",
    "UPDATE ",
    "DELETE ",
    "/site-packages/",
    "/work/",
    REPO,
    sys.prefix,
    "RecursionError",
    "Exception calling application",
    "Exception deserializing",
)
#: An INVALID_ARGUMENT message: the field's path, then the rule.
#: A refusal names its field first; a map entry by its key, quoted (``labels['Team']``).
FIELD_RULE = re.compile(r"^[A-Za-z_](?:[\w.\[\]]|'[^']*'|\"[^\"]*\")*: \S")


class Databases:
    """Every table of the scheduler's and the gateway's databases, read whole (the
    tables of a fuzzed suite hold a few rows each): PostgreSQL digests each table in
    one query; SQLite's are read here."""

    def __init__(self, urls: list[str]) -> None:
        self._engines = [sa.create_engine(url) for url in urls]
        self._queries: dict[sa.Engine, list[tuple[str, sa.TextClause]]] = {}
        self.last: dict[str, str] | None = None  # the newest fingerprint, while current
        for engine in self._engines:
            with engine.connect() as conn:
                tables = sa.inspect(conn).get_table_names()
            if engine.dialect.name == "postgresql":
                digests = ", ".join(
                    f"(SELECT count(*) || ' ' || md5(coalesce(string_agg(t::text, '|' "
                    f'ORDER BY t::text), \'\')) FROM "{table}" t) AS "{table}"'
                    for table in tables
                )
                self._queries[engine] = [("", sa.text(f"SELECT {digests}"))]
            else:
                self._queries[engine] = [
                    (table, sa.text(f'SELECT * FROM "{table}"')) for table in tables
                ]

    def fingerprint(self) -> dict[str, str]:
        prints = {}
        for engine in self._engines:
            name = engine.url.database
            with engine.connect() as conn:
                for table, query in self._queries[engine]:
                    if not table:  # one row: a digest per table
                        row = conn.execute(query).mappings().one()
                        prints.update({f"{name}:{t}": str(d) for t, d in row.items()})
                        continue
                    rows = sorted(map(repr, conn.execute(query).all()))
                    digest = hashlib.sha256(repr(rows).encode()).hexdigest()[:12]
                    prints[f"{name}:{table}"] = f"{len(rows)} {digest}"
        return prints

    def close(self) -> None:
        for engine in self._engines:
            engine.dispose()


def strings_in(msg: Message) -> list[str]:
    """Every string a request carries, nested ones too."""
    found: list[str] = []
    for field, value in msg.ListFields():
        if field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
            found += [str(part) for pair in value.items() for part in pair]  # a map's keys too
            continue
        values = value if field.is_repeated else [value]
        for item in values:
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                found += strings_in(item)
            elif isinstance(item, str):
                found.append(item)
    return found


def leaks(details: str, sent: list[str]) -> list[str]:
    """The internal markers in ``details`` that no string of the request explains (a
    refusal may quote the value it refuses)."""
    return [m for m in INTERNALS if m in details and not any(m in s for s in sent)]


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The tables whose content differs between two fingerprints."""
    return sorted(t for t in before.keys() | after.keys() if before.get(t) != after.get(t))


def settled(suite: Suite) -> None:
    """Wait until the suite's own start-up writes are done: the planner leads (its
    grant is the last write the store sees from a quiet suite; renewals keep the
    token), so from here on only requests write."""
    with hop_channel(suite, "cron-planner") as channel:
        stub = planner_grpc.CronPlannerServiceStub(channel)

        def leading() -> bool:
            try:
                status = stub.GetPlannerStatus(planner_pb.GetPlannerStatusRequest(), timeout=5)
            except grpc.RpcError:
                return False
            return bool(status.leader)

        eventually(leading, timeout=60, what="the planner leads")
