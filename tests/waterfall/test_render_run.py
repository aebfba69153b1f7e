"""``render_run``: one run's waterfall shows its own hops where they happened, never
percentiles of one sample or a tail it cannot have."""

from __future__ import annotations

import re

from cronwave_waterfall import build_runs, render_run
from cronwave_waterfall.runs import hop_order

from .synth import all_spans, make_runs


def test_one_runs_waterfall_shows_each_hop_where_it_happened() -> None:
    # Given the spans of one run across its seven hops
    (run,) = build_runs(all_spans(make_runs(1, seed=3)))
    hops = hop_order(run.hop_ns)
    assert len(hops) == 7

    # When its waterfall is drawn
    html = render_run(run)

    # Then each hop is a bar and a row with its own start, end and work in ms
    for hop in hops:
        row = re.search(rf'<tr class="hop" data-hop="{hop}">(.*?)</tr>', html)
        assert row is not None, hop
        cells = re.findall(r"<td>(.*?)</td>", row.group(1))
        start, end, work = (float(c.replace(",", "")) for c in cells[1:4])
        assert abs(start - run.hop_start_ns[hop] / 1e6) <= 0.05  # as shown: to 0.1 ms
        assert end >= start and work > 0
        assert f'<g class="hop" data-hop="{hop}">' in html
    # and the headline is the run's own end-to-end and lateness
    assert "end-to-end" in html and "fire lateness" in html
    # and nothing of a distribution: no percentile, no "not enough runs"
    assert not re.search(r"p50|p90|p99|not enough", html)
