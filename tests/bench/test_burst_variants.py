"""Which burst variants a bench run measures, at the default sizes and smaller ones
(no suite is started: the variants are only listed)."""

from __future__ import annotations

from pathlib import Path

from cronwave_bench.burst import variants
from cronwave_bench.context import BenchContext, Sizes
from cronwave_bench.harness import Backend


def _labels(tmp_path: Path, sizes: Sizes) -> dict[str, str]:
    ctx = BenchContext(Backend(database_url=None, redis_url=None), tmp_path, sizes)
    return {v.label: v.settings for v in variants(ctx)}


def test_every_headline_variant_runs_again_under_the_load_at_the_default_sizes(
    tmp_path: Path,
) -> None:
    labels = _labels(tmp_path, Sizes())

    headline = ("1,000 one-off", "1,000 cron", "10,000 one-off")
    assert list(labels) == [
        *headline,
        *(f"{label}, under load" for label in headline),
        "1,000 one-off, tuned",
    ]
    for label in headline:
        assert labels[label] == "2 workers; defaults"
        assert labels[f"{label}, under load"] == "2 workers; defaults; 510/s load"


def test_burst_loaded_keeps_the_first_variants_under_the_load_and_zero_none(
    tmp_path: Path,
) -> None:
    two = _labels(tmp_path, Sizes(burst_loaded=2, burst_tuned=0))
    none = _labels(tmp_path, Sizes(burst_loaded=0, burst_tuned=0))

    assert [label for label in two if label.endswith("under load")] == [
        "1,000 one-off, under load",
        "1,000 cron, under load",
    ]
    assert list(none) == ["1,000 one-off", "1,000 cron", "10,000 one-off"]
