"""The one mapping between a domain enum and the proto enum it travels as.

A member maps by name: member ``BUFFER_ONE`` of ``Overlap`` is the proto value
``OVERLAP_POLICY_BUFFER_ONE``. The table is built once, from the two enums, so a
value added to both needs no conversion code; a member without its proto value
fails at import, naming it. The domain types keep typed ``to_proto`` /
``from_proto`` / ``parse`` methods beside them (``cronwave_core.domain.spec``,
``cronwave_core.domain.runs``) that delegate here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Generic, TypeVar

from cronwave_core.errors import InvalidArgument

E = TypeVar("E", bound=StrEnum)
V = TypeVar("V", bound=int)


class ProtoEnum(Generic[E, V]):
    """``members`` <-> the values of ``wrapper`` named ``prefix + member.name``.

    ``unspecified`` is what the proto's 0 value means (``None``: 0 is refused, as an
    unknown value is). ``upper`` says how a member is shown to people: by its
    upper-case name (run states: ``"SUCCEEDED"``) or by its lower-case value
    (policies: ``"buffer_one"``).
    """

    def __init__(
        self,
        members: type[E],
        wrapper: type[V],
        prefix: str,
        *,
        unspecified: E | None = None,
        upper: bool = False,
    ) -> None:
        self.members = members
        self.prefix = prefix
        self.unspecified = unspecified
        self.upper = upper
        #: The proto value's name of each member, as the stored JSON of a schedule
        #: spells it (``"OVERLAP_POLICY_SKIP"``).
        self.names: dict[E, str] = {m: prefix + m.name for m in members}
        self.by_name: dict[str, E] = {name: m for m, name in self.names.items()}
        self._to_pb: dict[E, V] = {m: _value(wrapper, name) for m, name in self.names.items()}
        self._from_pb: dict[int, E] = {int(v): m for m, v in self._to_pb.items()}
        self.unspecified_value: V = _value(wrapper, prefix + "UNSPECIFIED")

    def to_proto(self, member: E) -> V:
        return self._to_pb[member]

    def lookup(self, value: int) -> E | None:
        """The member of ``value``, or None for 0 and values this code does not know."""
        return self._from_pb.get(value)

    def from_proto(self, value: int, field: str) -> E:
        """The member of ``value``; ``InvalidArgument(field)`` for a value this code
        does not know (or 0, when it means nothing)."""
        if value == 0 and self.unspecified is not None:
            return self.unspecified
        member = self._from_pb.get(value)
        if member is None:
            raise InvalidArgument(field, f"unknown value {value}")
        return member

    def parse(self, text: str, field: str) -> E:
        """The member named ``text``, in any case, ``-`` for ``_``;
        ``InvalidArgument(field)`` listing the choices otherwise."""
        member = self.members.__members__.get(str(text).strip().upper().replace("-", "_"))
        if member is None:
            raise InvalidArgument(field, f"{text!r} is not one of {', '.join(self.choices())}")
        return member

    def shown(self, member: E) -> str:
        return member.name if self.upper else member.value

    def choices(self) -> list[str]:
        """Every member as people spell it, in declaration order."""
        return [self.shown(m) for m in self.members]


def _value(wrapper: Any, name: str) -> Any:
    """``wrapper``'s value named ``name``; the generated stubs type the wrapper as a
    class, so its values come back as that class, not as a bare int."""
    try:
        return wrapper.Value(name)
    except ValueError:
        raise ValueError(
            f"{name} is not a value of the proto enum {wrapper.DESCRIPTOR.name}"
        ) from None
