"""A kind of cronwave error as a ``google.rpc.ErrorInfo``, both ways: its reason
(``errors.BY_REASON``), domain ``cronwave``, and as metadata the request field it is
about (``field``) and its attributes: strings as they are, ints in decimal, bools as
``true``/``false``, lists of strings as JSON arrays."""

from __future__ import annotations

import json
import typing
from typing import Any

from google.rpc import error_details_pb2

from cronwave_core import errors

DOMAIN = "cronwave"


def error_info(error: errors.CronwaveError) -> error_details_pb2.ErrorInfo | None:
    """``error``'s reason, domain and attributes (None: it has no kind on the wire)."""
    kind = errors.kind_of(error)
    if kind is None:
        return None
    reason, cls = kind
    metadata = {}
    field = getattr(cls, "field", None)
    if isinstance(field, str):
        metadata["field"] = field
    for name in _attributes(cls):
        value = getattr(error, name, None)
        if value is None:
            return None  # a subclass that did not set it: it goes by its code
        metadata[name] = _encode(value)
    return error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN, metadata=metadata)


def error_from_info(
    info: error_details_pb2.ErrorInfo, status: str, message: str
) -> errors.CronwaveError | None:
    """The error ``info`` stands for, with ``message``; its ``status`` is the call's.
    None for another domain, an unknown reason (from a newer server) or metadata
    that does not give every attribute: the call then maps by its code."""
    cls = errors.BY_REASON.get(info.reason)
    if info.domain != DOMAIN or cls is None:
        return None
    values = {}
    for name, hint in _attributes(cls).items():
        if name not in info.metadata:
            return None
        try:
            values[name] = _decode(info.metadata[name], hint)
        except ValueError:
            return None
    error = cls.__new__(cls)
    errors.CronwaveError.__init__(error, message)
    for name, value in values.items():
        setattr(error, name, value)
    if status != cls.status:
        error.status = status
    return error


def _attributes(cls: type[errors.CronwaveError]) -> dict[str, Any]:
    """The attributes a kind carries: its annotated instance attributes but the
    message, by name, with their types."""
    return {
        name: hint
        for name, hint in typing.get_type_hints(cls).items()
        if name != "message" and typing.get_origin(hint) is not typing.ClassVar
    }


def _encode(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return json.dumps(value, separators=(",", ":"))
    raise TypeError(f"an error attribute of type {type(value).__name__} has no wire form")


def _decode(text: str, hint: Any) -> object:
    """``text`` as the attribute type ``hint``; ValueError when it is not one."""
    if hint is str:
        return text
    if hint is bool:
        if text not in ("true", "false"):
            raise ValueError(f"not a bool: {text!r}")
        return text == "true"
    if hint is int:
        return int(text)
    if typing.get_origin(hint) is list:
        value = json.loads(text)  # JSONDecodeError is a ValueError
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"not a list of strings: {text!r}")
        return value
    raise TypeError(f"an error attribute of type {hint} has no wire form")
