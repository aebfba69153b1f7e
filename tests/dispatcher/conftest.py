from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dispatcher.cluster import Cluster, running_cluster


@pytest.fixture
def cluster(tmp_path: Path, database_url: str, redis_url: str, namespace: str) -> Iterator[Cluster]:
    """workflow-store, dispatcher and worker processes for one test."""
    with running_cluster(tmp_path / "cluster", database_url, redis_url, namespace) as running:
        yield running
