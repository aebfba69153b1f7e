"""Where a worker's job types come from: its built-ins, the job modules it is started
with, and the entry points of installed packages.

- ``CRONWAVE_JOB_MODULES`` (``cronwave worker --jobs`` / ``cronwave up --jobs`` set
  it): importable modules, comma-separated.
- The entry-point group ``cronwave.jobs`` of every installed distribution
  (``importlib.metadata``): ``name = package.module`` names a module;
  ``name = package.module:attr`` names a ``JobType``, a list of them, or a
  ``job_types(settings)`` function.

A module gives the job types its ``job_types(settings)`` function returns (given the
``WorkerSettings``) when it has one, else every module attribute that is a
``JobType`` (what ``@cronwave.job`` makes). Nothing is registered at import: the
worker looks, so importing a job module twice, or in a test, changes nothing.

Every failure stops start-up, naming where it came from: a module that cannot be
imported (with its error), one that defines no job type, and two sources that define
one job type name (both named).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from cronwave import JobType
from cronwave_core.errors import ConfigurationError
from cronwave_core.settings import WorkerSettings
from worker.jobs.builtin import builtin_job_types

JOB_MODULES_VAR = "CRONWAVE_JOB_MODULES"
ENTRY_POINT_GROUP = "cronwave.jobs"
BUILTIN_SOURCE = "the worker's built-in jobs"
_HOW = (
    "decorate a function with @cronwave.job(...) in the module, or give it a "
    "job_types(settings) function returning JobType values"
)


@dataclass(frozen=True)
class Found:
    """A job type and where it was found (for messages)."""

    job_type: JobType
    source: str


def discover(settings: WorkerSettings) -> list[JobType]:
    """Every job type this worker knows: built-ins, job modules, entry points."""
    found: list[Found] = [Found(t, BUILTIN_SOURCE) for t in builtin_job_types()]
    modules: set[str] = set()
    for module_name in settings.job_modules:
        source = f"job module {module_name!r} ({JOB_MODULES_VAR} / --jobs)"
        module = _import(module_name, source)
        modules.add(module.__name__)
        found += [Found(t, source) for t in module_job_types(module, settings, source)]
    for entry_point in sorted(
        importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name
    ):
        if not entry_point.attr and entry_point.module in modules:
            continue  # the same module named twice: its job types once
        source = _describe(entry_point)
        loaded = _load(entry_point, source)
        if isinstance(loaded, ModuleType):
            modules.add(loaded.__name__)
            types = module_job_types(loaded, settings, source)
        else:
            types = _job_types_of(loaded, settings, source)
        found += [Found(t, source) for t in types]
    return _unique(found)


def module_job_types(module: ModuleType, settings: WorkerSettings, source: str) -> list[JobType]:
    """The job types of ``module`` (see the module's docstring)."""
    factory = getattr(module, "job_types", None)
    if callable(factory):
        return _job_types_of(factory, settings, source)
    types = [value for _name, value in sorted(vars(module).items()) if isinstance(value, JobType)]
    if not types:
        raise ConfigurationError(f"{source}: defines no job type; {_HOW}")
    return types


def _job_types_of(value: Any, settings: WorkerSettings, source: str) -> list[JobType]:
    if isinstance(value, JobType):
        return [value]
    if callable(value):
        value = value(settings)
    types = list(value) if isinstance(value, Iterable) else [value]
    if not types or not all(isinstance(t, JobType) for t in types):
        raise ConfigurationError(f"{source}: must give JobType values; {_HOW}")
    return types


def _unique(found: list[Found]) -> list[JobType]:
    """One job type per name; the same object found twice (one module importing
    another's job) counts once."""
    by_name: dict[str, Found] = {}
    for item in found:
        first = by_name.get(item.job_type.name)
        if first is None:
            by_name[item.job_type.name] = item
        elif first.job_type is not item.job_type:
            raise ConfigurationError(
                f"job type '{item.job_type.name}' is defined twice: by {first.source} and "
                f"by {item.source}; give one of them another name, or load only one"
            )
    return [item.job_type for item in by_name.values()]


def _import(module_name: str, source: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise ConfigurationError(
                f"{source}: cannot import {module_name!r}: {exc}; is it installed, or its "
                "directory on PYTHONPATH?"
            ) from exc
        raise _import_error(module_name, source, exc) from exc
    except Exception as exc:  # whatever the module raised stops start-up, named
        raise _import_error(module_name, source, exc) from exc


def _import_error(module_name: str, source: str, exc: Exception) -> ConfigurationError:
    return ConfigurationError(
        f"{source}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
    )


def _load(entry_point: importlib.metadata.EntryPoint, source: str) -> Any:
    try:
        return entry_point.load()
    except Exception as exc:
        raise _import_error(entry_point.value, source, exc) from exc


def _describe(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = getattr(entry_point, "dist", None)
    owner = f" of {dist.name}" if dist is not None and getattr(dist, "name", None) else ""
    return f"entry point '{entry_point.name} = {entry_point.value}'{owner} ({ENTRY_POINT_GROUP})"
