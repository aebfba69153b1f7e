"""The store's PostgreSQL pool pings a connection only when it sat idle: one back within
``PING_IDLE_AFTER_S`` goes out as it is (no round trip per transaction), one idle
longer is pinged, and replaced when PostgreSQL dropped it meanwhile. Real PostgreSQL;
the drop is ``pg_terminate_backend`` of the pooled connection's own backend."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import PG_URL, _pg_admin_url, scheduler_database
from workflow_store import db as store_db

pytestmark = pytest.mark.skipif(
    not PG_URL, reason="the pool's ping is PostgreSQL's (CRONWAVE_TEST_DATABASE_URL)"
)


def _backend_pid(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())


def test_a_connection_back_at_once_is_not_pinged_and_one_dropped_while_idle_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with scheduler_database("postgres", tmp_path, migrated=False) as url:
        engine = store_db.create_engine(url, instrument=False)
        pings: list[object] = []
        ping = engine.dialect.do_ping
        monkeypatch.setattr(
            engine.dialect, "do_ping", lambda conn: pings.append(conn) or ping(conn)
        )
        admin = sa.create_engine(_pg_admin_url(), isolation_level="AUTOCOMMIT")
        try:
            # Given a pooled connection used twice in a row: the second checkout
            # follows the first within the idle threshold and goes out unpinged
            first = _backend_pid(engine)
            assert _backend_pid(engine) == first
            assert pings == []

            # When it sits idle past the threshold and PostgreSQL drops it
            time.sleep(store_db.PING_IDLE_AFTER_S + 0.2)
            with admin.connect() as conn:
                dropped = conn.execute(
                    sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": first}
                ).scalar_one()
            assert dropped  # the fault happened

            # Then the next checkout pings it, finds it gone, and hands out a new one
            second = _backend_pid(engine)
            assert len(pings) == 1
            assert second != first
        finally:
            engine.dispose()
            admin.dispose()
