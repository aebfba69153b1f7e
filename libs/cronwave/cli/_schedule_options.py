"""The options ``cronwave schedule create``, ``update`` and ``preview`` share, and the
deadline options' values as ``policy_of`` and ``update_of`` take them."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cronwave.cli import _schedule_args as args
from cronwave_core.domain.deadlines import NOTIFY_FORMATS
from cronwave_core.domain.labels import labels_value, parse_label
from cronwave_core.domain.spec import DST_GAPS, DST_REPEATS
from cronwave_core.errors import InvalidArgument

CronOption = Annotated[
    list[str],
    typer.Option("--cron", help="Cron expression (5 or 6 fields, macros, L W #); repeatable."),
]
EveryOption = Annotated[
    list[str],
    typer.Option("--every", help="An interval such as 15m (epoch + phase + k*every); repeatable."),
]
PhaseOption = Annotated[
    list[str], typer.Option("--phase", help="Offset of the --every before it, e.g. 5m.")
]
AtOption = Annotated[
    list[str], typer.Option("--at", help="A one-off ISO-8601 instant; repeatable.")
]
ExcludeOption = Annotated[
    list[str],
    typer.Option("--exclude-date", help="A local date (YYYY-MM-DD) with no runs; repeatable."),
]
TzOption = Annotated[
    str,
    typer.Option("--tz", help="IANA zone the cron and times without an offset are read in."),
]
DstGapOption = Annotated[
    str | None,
    typer.Option(
        "--dst-gap", help=f"Slot in a spring-forward gap: {'|'.join(DST_GAPS.choices())}."
    ),
]
DstRepeatOption = Annotated[
    str | None,
    typer.Option(
        "--dst-repeat",
        help=f"Slot in a fall-back hour: {'|'.join(DST_REPEATS.choices())}.",
    ),
]


_LABEL_HELP = (
    "A label KEY=VALUE, e.g. team=billing; critical=true pages when its slots do not "
    "succeed; repeatable."
)
LabelOption = Annotated[list[str], typer.Option("--label", help=_LABEL_HELP)]
LabelUpdateOption = Annotated[
    list[str] | None, typer.Option("--label", help=_LABEL_HELP + " Replaces the labels.")
]


def labels_of(texts: list[str]) -> dict[str, str]:
    """The ``--label KEY=VALUE`` options as labels (checked: ``labels['KEY']``)."""
    return dict(labels_value([parse_label(text) for text in texts]))


DeadlineOption = Annotated[
    str | None,
    typer.Option(
        "--deadline",
        help="Each slot must have SUCCEEDED within this long of its fire time, e.g. 45m; "
        "a breach is recorded and sent to the --notify webhooks.",
    ),
]
_NOTIFY_HELP = "An http(s) webhook a deadline breach is POSTed to; repeatable."
NotifyOption = Annotated[list[str], typer.Option("--notify", help=_NOTIFY_HELP)]
NotifyUpdateOption = Annotated[
    list[str] | None, typer.Option("--notify", help=_NOTIFY_HELP + " Replaces the webhooks.")
]
NotifyFormatOption = Annotated[
    str | None,
    typer.Option(
        "--notify-format",
        help=f"The --notify webhooks' body: {'|'.join(NOTIFY_FORMATS.choices())} "
        '(slack: {"text": ...}).',
    ),
]


def deadline_keywords(
    deadline: str | None, notify: list[str] | None, notify_format: str | None
) -> dict[str, Any]:
    """The keywords of ``policy_of`` / ``update_of`` for the options given."""
    keywords: dict[str, Any] = {}
    if notify_format is not None and not notify:
        raise InvalidArgument(
            "--notify-format", "give it with --notify: it is the format of those webhooks"
        )
    if deadline is not None:
        keywords["deadline"] = args.parse_duration(deadline, "--deadline")
    if notify:
        keywords["notify"] = notify
        keywords["notify_format"] = notify_format
    return keywords
