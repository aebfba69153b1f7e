"""The one place that turns environment variables into typed settings.

A settings class is a frozen, keyword-only dataclass whose every field is declared
with ``setting(variable, kind, default, doc)``: the variable it is read from, how the
text is parsed (a ``Kind``), its default and what it means. ``load`` builds one from
an environment, and ``variables`` lists what a class reads, which is how the
configuration table of ``docs/operations/configure.md`` is generated (``tools/config_table.py``).

Rules every variable follows:

- unset or empty means the default;
- a value that breaks its kind's rule stops start-up with a ``ConfigurationError``
  naming the variable and the rule (``CRONWAVE_GRACE: expected a duration ...``);
- a duration is a number with a unit, ``500ms``, ``5s``, ``2m`` or ``1h``; a bare
  number keeps the unit the variable always had (seconds, or milliseconds for a
  variable whose name ends in ``_MS``), so values written before units existed keep
  their meaning.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import Any, Generic, Self, TypeVar

from cronwave_core.errors import ConfigurationError
from cronwave_core.redaction import redact
from cronwave_core.targets import RULE, addresses, target

T = TypeVar("T")
_KEY = "cronwave.setting"
_DERIVED = "cronwave.derived"


class Kind(Generic[T]):
    """How the text of one variable becomes a value: ``parse`` raises ``ValueError``
    when the text breaks ``rule`` (a phrase: "a whole number from 1 to 10000")."""

    rule: str = ""

    @property
    def summary(self) -> str:
        """``rule`` in a few words, for a table."""
        return self.rule

    def parse(self, raw: str) -> T:
        raise NotImplementedError

    def show(self, value: T) -> str:
        """``value`` as it would be written in the environment (for the docs)."""
        return str(value)


@dataclass(frozen=True)
class Derived(Generic[T]):
    """A default computed at load time from the fields loaded before it (``values``)
    or from the environment; ``shown`` is how the docs describe it."""

    shown: str
    compute: Callable[[Mapping[str, Any], Mapping[str, str]], T]


@dataclass(frozen=True)
class Variable:
    """One environment variable as a settings field reads it."""

    name: str
    kind: Kind[Any]
    default: Any
    doc: str
    secret: bool = False  # never echoed whole (a password, a key)

    @property
    def shown_default(self) -> str:
        if isinstance(self.default, Derived):
            return self.default.shown
        if self.default is None or self.default in ("", ()):
            return "unset"
        return self.kind.show(self.default)


def setting(variable: str, kind: Kind[Any], default: Any, doc: str, *, secret: bool = False) -> Any:
    """A dataclass field read from ``variable``. A ``Derived`` default leaves the field
    without a dataclass default: code that builds the class by hand passes it. A
    ``secret`` one (a token) is left out of the class's repr, so a logged settings
    object does not carry it."""
    spec = Variable(variable, kind, default, " ".join(doc.split()), secret)
    if isinstance(default, Derived):
        return field(metadata={_KEY: spec}, repr=not secret)
    return field(default=default, metadata={_KEY: spec}, repr=not secret)


def derived(compute: Callable[[Mapping[str, Any], Mapping[str, str]], T]) -> Any:
    """A dataclass field no variable sets: computed at load time, after the settings,
    from them (``values``) and the environment, e.g. a folder under the data dir."""
    return field(metadata={_DERIVED: compute})


def variables(cls: type) -> Iterator[tuple[str, Variable]]:
    """``(field name, variable)`` of every setting of ``cls``, in declaration order."""
    for f in fields(cls):
        spec = f.metadata.get(_KEY)
        if spec is not None:
            yield f.name, spec


def read(spec: Variable, env: Mapping[str, str], values: Mapping[str, Any]) -> Any:
    """One variable's value from ``env`` (its default when unset or empty); ``values``
    are the fields loaded before it, for a ``Derived`` default."""
    raw = (env.get(spec.name) or "").strip()
    if not raw:
        if isinstance(spec.default, Derived):
            return spec.default.compute(values, env)
        return spec.default
    try:
        return spec.kind.parse(raw)
    except ValueError:
        # A malformed URL may still carry a password or a key: never echoed whole, and
        # a secret's value not at all unless its password can be told apart and masked.
        if spec.secret and "://" not in raw:
            got = "a value not shown here (it may hold a secret)"
        else:
            got = repr(redact(raw))
        raise ConfigurationError(f"{spec.name}: expected {spec.kind.rule}, got {got}") from None


def load(cls: type[T], env: Mapping[str, str]) -> T:
    """An instance of the settings class ``cls`` from ``env``; a malformed value stops
    here with a ``ConfigurationError`` naming the variable and the rule."""
    values: dict[str, Any] = {}
    for name, spec in variables(cls):
        values[name] = read(spec, env, values)
    # ``cls`` is a dataclass, which a plain ``type[T]`` cannot say to the type checker.
    for f in fields(cls):  # type: ignore[arg-type]
        if _DERIVED in f.metadata:
            values[f.name] = f.metadata[_DERIVED](values, env)
        elif f.name not in values and f.default is MISSING:
            raise TypeError(f"{cls.__name__}.{f.name} is neither a setting nor derived")
    return cls(**values)


class FromEnv:
    """``from_env`` for a settings dataclass (``load``)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        return load(cls, os.environ if env is None else env)


# -- kinds ---------------------------------------------------------------------------

_DURATION = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?$")
_UNITS = {"ms": timedelta(milliseconds=1), "s": timedelta(seconds=1), "m": timedelta(minutes=1)}
_UNITS["h"] = timedelta(hours=1)


def show_duration(value: timedelta) -> str:
    """``value`` in the environment's notation: ``500ms``, ``5s``, ``2m``."""
    ms = value / timedelta(milliseconds=1)
    if ms < 1000:
        return f"{ms:g}ms"
    seconds = value.total_seconds()
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


class Duration(Kind[timedelta]):
    """``500ms``, ``5s``, ``2m``, ``1h``; a bare number is in ``bare`` (``"s"`` or
    ``"ms"``). ``minimum`` is inclusive unless ``positive``."""

    def __init__(
        self,
        bare: str = "s",
        minimum: timedelta = timedelta(0),
        maximum: timedelta | None = None,
        positive: bool = False,
    ) -> None:
        self.bare, self.minimum, self.maximum, self.positive = bare, minimum, maximum, positive
        unit = "milliseconds" if bare == "ms" else "seconds"
        bound = f"longer than {show_duration(minimum)}" if positive else ""
        if maximum is not None:
            low = show_duration(minimum)
            bound = f"from {low} to {show_duration(maximum)}"
            if positive:
                bound = f"longer than {low}, at most {show_duration(maximum)}"
        elif not positive and minimum > timedelta(0):
            bound = f"at least {show_duration(minimum)}"
        tail = f", {bound}" if bound else ""
        self.rule = f"a duration such as 500ms, 5s or 2m (a bare number is {unit}){tail}"
        self._summary = f"duration (bare number: {unit}){tail}"

    @property
    def summary(self) -> str:
        return self._summary

    def parse(self, raw: str) -> timedelta:
        match = _DURATION.match(raw.lower())
        if match is None:
            raise ValueError()
        value = float(match.group(1)) * _UNITS[match.group(2) or self.bare]
        too_low = value <= self.minimum if self.positive else value < self.minimum
        if too_low or (self.maximum is not None and value > self.maximum):
            raise ValueError()
        return value

    def show(self, value: timedelta) -> str:
        return show_duration(value)


class Integer(Kind[int]):
    def __init__(self, minimum: int = 0, maximum: int | None = None) -> None:
        self.minimum, self.maximum = minimum, maximum
        if maximum is not None:
            self.rule = f"a whole number from {minimum} to {maximum}"
        else:
            self.rule = f"a whole number, at least {minimum}"

    def parse(self, raw: str) -> int:
        value = int(raw)  # ValueError for "soon", "1.5"
        if value < self.minimum or (self.maximum is not None and value > self.maximum):
            raise ValueError()
        return value


class Switch(Kind[bool]):
    rule = "on or off"
    _ON = ("on", "1", "true")
    _OFF = ("off", "0", "false")

    def parse(self, raw: str) -> bool:
        text = raw.lower()
        if text not in self._ON + self._OFF:
            raise ValueError()
        return text in self._ON

    def show(self, value: bool) -> str:
        return "on" if value else "off"


class Choice(Kind[str]):
    def __init__(self, *choices: str) -> None:
        self.choices = choices
        self.rule = " or ".join(choices)

    def parse(self, raw: str) -> str:
        if raw.lower() not in self.choices:
            raise ValueError()
        return raw.lower()


class Text(Kind[str]):
    rule = "text"

    def parse(self, raw: str) -> str:
        return raw


class Names(Kind[tuple[str, ...]]):
    """A comma-separated list of names; at least one unless ``empty``."""

    def __init__(self, empty: bool = True) -> None:
        self.empty = empty
        self.rule = "comma-separated names" if empty else "one or more comma-separated names"

    def parse(self, raw: str) -> tuple[str, ...]:
        names = tuple(name.strip() for name in raw.split(",") if name.strip())
        if not names and not self.empty:
            raise ValueError()
        return names

    def show(self, value: tuple[str, ...]) -> str:
        return ",".join(value)


class Address(Kind[str]):
    rule = "HOST:PORT"

    def parse(self, raw: str) -> str:
        host, sep, port = raw.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError()
        return raw


class Addresses(Kind[str]):
    """One address, or a service's replicas (``cronwave_core.targets``): where a
    process listens when it is that service (one address then), where its callers
    reach it."""

    rule = RULE

    @property
    def summary(self) -> str:
        return "HOST:PORT, or IP:PORT,IP:PORT,... (replicas)"

    def parse(self, raw: str) -> str:
        named = addresses(raw)
        if len(named) == 1:
            return Address().parse(named[0])
        try:
            target(raw)
        except ConfigurationError:
            raise ValueError() from None
        return ",".join(named)


class Url(Kind[str]):
    """A URL with one of ``schemes`` (any, when none is given); ``rule`` as given."""

    def __init__(self, rule: str, *schemes: str) -> None:
        self.rule, self.schemes = rule, schemes

    def parse(self, raw: str) -> str:
        scheme, sep, _ = raw.partition("://")
        if not sep or not scheme or (self.schemes and scheme not in self.schemes):
            raise ValueError()
        return raw


class Directory(Kind[Path]):
    rule = "a directory path"

    def parse(self, raw: str) -> Path:
        return Path(raw).expanduser().resolve()

    def show(self, value: Path) -> str:
        return str(value)


class File(Kind[Path]):
    rule = "a file path"

    def parse(self, raw: str) -> Path:
        return Path(raw).expanduser().resolve()

    def show(self, value: Path) -> str:
        return str(value)
