"""``--jobs MODULE,...``: the job modules a worker loads, as ``cronwave worker`` and
``cronwave up`` take them. They add to ``CRONWAVE_JOB_MODULES``; the worker imports
them (this process does not)."""

from __future__ import annotations

from collections.abc import Mapping

from cronwave_core.errors import InvalidArgument

JOB_MODULES_VAR = "CRONWAVE_JOB_MODULES"
HELP = (
    "Job modules the worker loads, comma-separated (importable: installed, or their "
    "directory on PYTHONPATH); added to CRONWAVE_JOB_MODULES. Installed packages' "
    "entry points (group cronwave.jobs) are loaded too."
)


def parse_modules(text: str, field: str = "--jobs") -> list[str]:
    """The module names of ``text``; a name that is not a dotted Python identifier is
    refused, naming it."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if not all(part.isidentifier() for part in name.split(".")):
            raise InvalidArgument(
                field,
                f"{name!r} is not a module name: dotted Python identifiers, comma-separated "
                "(e.g. acme.jobs,acme.reports)",
            )
    return names


def with_job_modules(environ: Mapping[str, str], jobs: str | None) -> dict[str, str]:
    """``environ`` with ``jobs`` added to ``CRONWAVE_JOB_MODULES`` (each module once)."""
    env = dict(environ)
    if jobs is None:
        return env
    modules = parse_modules(env.get(JOB_MODULES_VAR, ""), JOB_MODULES_VAR)
    modules += parse_modules(jobs)
    env[JOB_MODULES_VAR] = ",".join(dict.fromkeys(modules))
    return env
