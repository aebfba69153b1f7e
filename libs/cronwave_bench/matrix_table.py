"""The fault matrix's figures as a Markdown table, one row per fault."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cronwave_bench.matrix_faults import Applied
from cronwave_bench.slot_audit import WindowAudit


def _recovery_cell(audit: WindowAudit, applied: Applied | None) -> str:
    if applied is None or applied.fault == "baseline":
        return "-"
    if audit.recovery_from_injection_s is None:
        return "not recovered in the window"
    text = f"{audit.recovery_from_injection_s:.2f} s"
    if applied.held and audit.recovery_from_end_s is not None:
        after = audit.recovery_from_end_s
        text += (
            f" ({after:.2f} s after its end)" if after >= 0 else f" ({-after:.2f} s before its end)"
        )
    return text


def table(
    audits: Sequence[WindowAudit],
    applied: Sequence[Applied],
    left_out: Mapping[str, str] | None = None,
) -> str:
    """The matrix as a Markdown table, one row per fault (a fault left out says why)."""
    labels = {a.fault: a for a in applied}
    lines = [
        "| fault | slots audited | missing | duplicate | stuck | late (> tolerance) "
        "| MISSED by reason | recovery (from injection) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for audit in audits:
        fault = labels.get(audit.name)
        label = fault.label if fault else audit.name
        reasons = ", ".join(f"{k} {v}" for k, v in audit.missed_by_reason.items()) or "-"
        missing = str(audit.missing)
        if audit.contradicted:
            missing += f" ({audit.contradicted} MISSED with a reason their record contradicts)"
        duplicate = str(audit.duplicate)
        notes = []
        if audit.body_started_twice:
            notes.append(f"{audit.body_started_twice} bodies recorded starting twice")
        if audit.reruns:
            notes.append(f"{audit.reruns} bodies re-run after a lost completion")
        if audit.reruns_possible:
            notes.append(f"+{audit.reruns_possible} more possible")
        if audit.reruns_not_begun:
            notes.append(f"{audit.reruns_not_begun} re-attempts of a claim never begun")
        if notes:
            duplicate += f" ({'; '.join(notes)})"
        stuck = str(audit.stuck) + (f" (+{audit.unsettled} unsettled)" if audit.unsettled else "")
        lines.append(
            f"| {label} | {audit.slots} | {missing} | {duplicate} | {stuck} | {audit.late} "
            f"| {reasons} | {_recovery_cell(audit, fault)} |"
        )
    for name, why in (left_out or {}).items():
        lines.append(f"| {name} | left out: {why} | | | | | | |")
    return "\n".join(lines)
