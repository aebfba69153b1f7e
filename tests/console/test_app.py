"""``console.app``: the waterfall's page styles, applied inside the chart only."""

from __future__ import annotations

from console.app import scoped


def test_the_waterfall_styles_are_scoped_to_the_chart_and_body_rules_dropped() -> None:
    css = "body { margin: 24px; }\nth, td { padding: 2px; }\n.legend i { width: 12px; }"
    assert scoped(css, ".wf") == (
        ".wf th, .wf td { padding: 2px; }\n.wf .legend i { width: 12px; }"
    )
