"""What an installed package adds to cronwave: its settings, its failure drills, the
service identities of its own servers and the authorisation rules of their RPCs.

A package declares one ``Extension`` by an entry point of the group
``cronwave.extensions`` (named as the package, naming the object), as the billing
example does in its pyproject.toml::

    [project.entry-points."cronwave.extensions"]
    billing = "cronwave_billing.extension:EXTENSION"

cronwave reads them where it lists its own: the configuration table and
``check_env`` (``settings.components()``), ``TestHooks`` (a drill variable without
``CRONWAVE_TEST_HOOKS`` stops start-up), the suite's certificates
(``identity.service_identities()``) and the rule table (``rules.rule_table()``). The
core names no such package, setting, identity or RPC itself.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points

from cronwave_core.config import FromEnv
from cronwave_core.errors import ConfigurationError

GROUP = "cronwave.extensions"


@dataclass(frozen=True)
class Extension:
    """``settings``: classes its processes read, shown in the configuration table after
    cronwave's own. ``drills``: classes of failure drills, each variable refused (start-up
    stops) unless ``CRONWAVE_TEST_HOOKS=1``, shown after ``TestHooks``. ``identities``:
    the service names its servers present in their certificates. ``rules``: one rule per
    RPC of its servers (``/package.Service/Method``); a rule may name cronwave's services
    and its own identities; each is a ``cronwave_core.security.rules.Rule``, checked
    when the rule table is built (this module imports nothing of the security layer,
    which reads it)."""

    settings: tuple[type[FromEnv], ...] = ()
    drills: tuple[type[FromEnv], ...] = ()
    identities: tuple[str, ...] = ()
    rules: Mapping[str, object] = field(default_factory=dict)


@functools.cache
def installed() -> tuple[Extension, ...]:
    """The extensions of the installed packages, in the order of their entry points'
    names; refused, naming the entry point, when one names something else."""
    found = []
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        declared = point.load()
        if not isinstance(declared, Extension):
            raise ConfigurationError(
                f"entry point {point.name} = {point.value} of group {GROUP} names a "
                f"{type(declared).__name__}, not a cronwave_core.extensions.Extension"
            )
        found.append(declared)
    return tuple(found)


__all__ = ["GROUP", "Extension", "installed"]
