"""The tests' workflow-store harness (``tests.harness.store``): a port picked free and
taken before the store binds it costs a start on another port, not the test."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.harness import store as harness
from tests.harness.store import StoreProcess


def test_a_store_whose_picked_port_was_taken_starts_on_another(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a port that someone else listens on, handed out as free to the next store
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        picks = iter([port])
        real = harness.free_port
        monkeypatch.setattr(harness, "free_port", lambda: next(picks, None) or real())
        proc = StoreProcess(tmp_path / "store", database_url)
        assert proc.port == port

        # When it starts
        try:
            proc.start()

            # Then it answers on another port, and its first try said why it moved
            assert proc.port != port and proc.alive()
            first_log = (tmp_path / "store" / f"workflow-store-{port}.log").read_text()
            assert harness.PORT_TAKEN in first_log
        finally:
            proc.stop()
            proc.table.close([])
