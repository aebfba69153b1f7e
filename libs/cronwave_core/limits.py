"""The request limits every service applies, in one frozen value.

A limit is checked before anything is written, and a refusal names the field, the
rule, the limit and the size it was given (``schedule.payload_json: at most 262144
bytes, got 10000000``). The values come from ``cronwave_core.settings.LimitSettings``
(``CRONWAVE_MAX_*``), read once in each service's ``main()``.

A run is read back whole (GetRuns, a claim, the worker's completion cache) by clients
that receive at most 4 MiB (gRPC's default, ``GRPC_MESSAGE_LIMIT``). So a run's payload,
result and checkpoint together stay under that (``RUN_BLOBS_BYTES``): a result or a
checkpoint the store took but no reader could receive left its run stuck RUNNING, its
completion's answer and its sweep failing every time.

gRPC refuses a message over a server's ``max_receive_message_length`` before any
handler runs, with a message that names no field. So each server's transport cap
(``receive_bytes``) sits well above what its application limits allow a request to
hold, and the servicer, which knows the field, refuses the oversized part itself;
only a request far past every limit meets gRPC's own refusal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cronwave_core.errors import InvalidArgument

KIB = 1024
MIB = 1024 * KIB
#: gRPC's default for the largest message a channel or server receives: every client's.
GRPC_MESSAGE_LIMIT = 4 * MIB
#: The most a run's payload, result and checkpoint may hold together, so that one run at
#: all three limits is still well under ``GRPC_MESSAGE_LIMIT`` when read back whole.
RUN_BLOBS_BYTES = 3 * MIB

#: The characters of an id or a name a caller chooses (run ids, idempotency keys,
#: worker ids, queues, cursors, event kinds, error types): ASCII
#: letters and digits and these punctuation marks, nothing else (no space, no control
#: or non-ASCII character).
ID_PUNCTUATION = "._-:@/+=#"
ID_ALPHABET_RULE = "ASCII letters, digits and . _ - : @ / + = #"
_ID = re.compile(r"[A-Za-z0-9._\-:@/+=#]+")


@dataclass(frozen=True)
class RequestLimits:
    """``payload_bytes``: a schedule's payload, UTF-8 bytes of its JSON.
    ``id_chars``: an id or name a caller chooses, in characters of
    ``ID_ALPHABET_RULE`` (schedule ids and job type names keep their own, narrower
    patterns, within the same length). ``note_bytes``: a note or reason (a pause
    note, a cancel or release reason, a missed slot's reason). ``page_size``: the
    most items a listing returns in one page (ListSchedules, ListDeadLetters,
    ListAuditEvents). ``backfill_slots``: the most fire times one backfill covers.
    ``result_bytes``: a run's result, UTF-8 bytes of its JSON (a job returning more
    fails). ``checkpoint_bytes``: a run's checkpoint, UTF-8 bytes of its JSON (saving
    more raises in the job). ``receive_bytes``: the workflow-store's gRPC receive cap,
    far above the others so the servicer names the field that is too large (the other
    services' caps are fixed by their requests' sizes)."""

    payload_bytes: int = 256 * KIB
    id_chars: int = 128
    note_bytes: int = 1 * KIB
    page_size: int = 1_000
    backfill_slots: int = 10_000
    result_bytes: int = 1 * MIB
    checkpoint_bytes: int = 1 * MIB
    receive_bytes: int = 16 * MIB

    def __post_init__(self) -> None:
        for name in (
            "payload_bytes",
            "id_chars",
            "note_bytes",
            "page_size",
            "backfill_slots",
            "result_bytes",
            "checkpoint_bytes",
            "receive_bytes",
        ):
            if getattr(self, name) <= 0:
                raise LimitConflict(
                    (name,), f"RequestLimits.{name} must be positive, got {getattr(self, name)}"
                )
        largest = max(self.payload_bytes, self.result_bytes, self.checkpoint_bytes)
        if self.receive_bytes < 4 * largest:
            raise LimitConflict(
                ("receive_bytes",),
                "RequestLimits.receive_bytes must be at least 4 times payload_bytes, "
                "result_bytes and checkpoint_bytes, so an oversized one reaches the servicer "
                "and is refused by its field name",
            )
        blobs = self.payload_bytes + self.result_bytes + self.checkpoint_bytes
        if blobs > RUN_BLOBS_BYTES:
            raise LimitConflict(
                ("payload_bytes", "result_bytes", "checkpoint_bytes"),
                f"RequestLimits.payload_bytes + result_bytes + checkpoint_bytes must be at "
                f"most {RUN_BLOBS_BYTES}, got {blobs}: a run holding all three is read back "
                f"whole by clients that receive at most {GRPC_MESSAGE_LIMIT} bytes",
            )

    def identifier(self, value: str, field: str, *, required: bool = False) -> str:
        """An id or name: at most ``id_chars`` characters of ``ID_ALPHABET_RULE``;
        empty only when not ``required``."""
        if not value:
            if required:
                raise InvalidArgument(field, "required")
            return value
        if len(value) > self.id_chars:
            raise InvalidArgument(
                field, f"must be at most {self.id_chars} characters, got {len(value)}"
            )
        if not _ID.fullmatch(value):
            bad = next(c for c in value if not _ID.fullmatch(c))
            raise InvalidArgument(
                field,
                f"must use only {ID_ALPHABET_RULE} (found U+{ord(bad):04X} at index "
                f"{value.index(bad)})",
            )
        return value

    def note(self, value: str, field: str) -> str:
        """A note or reason: at most ``note_bytes`` bytes of UTF-8, no NUL."""
        size = utf8_size(value)
        if size > self.note_bytes:
            raise InvalidArgument(field, f"must be at most {self.note_bytes} bytes, got {size}")
        if "\x00" in value:
            raise InvalidArgument(
                field, f"must not contain NUL characters (found one at index {value.index(chr(0))})"
            )
        return value

    def payload_size(self, value: str, field: str) -> int:
        """The UTF-8 size of a payload's JSON text, refused over ``payload_bytes``
        before it is parsed."""
        size = utf8_size(value)
        if size > self.payload_bytes:
            raise InvalidArgument(field, f"at most {self.payload_bytes} bytes, got {size}")
        return size

    def result_size(self, value: str, field: str) -> int:
        """The UTF-8 size of a run's result JSON, refused over ``result_bytes`` before
        it is parsed."""
        return _at_most(value, field, self.result_bytes, "CRONWAVE_MAX_RESULT_BYTES")

    def checkpoint_size(self, value: str, field: str) -> int:
        """The UTF-8 size of a run's checkpoint JSON, refused over ``checkpoint_bytes``
        before it is parsed."""
        return _at_most(value, field, self.checkpoint_bytes, "CRONWAVE_MAX_CHECKPOINT_BYTES")

    def page(self, limit: int, field: str = "limit") -> int:
        """A listing's page size: 0 (the listing's default) up to ``page_size``."""
        if limit < 0:
            raise InvalidArgument(field, f"must not be negative, got {limit}")
        if limit > self.page_size:
            raise InvalidArgument(
                field, f"must be at most {self.page_size} per page, got {limit}; page on"
            )
        return limit


class LimitConflict(ValueError):
    """Limits that break a rule together; ``fields`` names the ones the rule binds."""

    def __init__(self, fields: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.fields = fields


def _at_most(value: str, field: str, limit: int, setting: str) -> int:
    size = utf8_size(value)
    if size > limit:
        raise InvalidArgument(field, f"at most {limit} bytes ({setting}), got {size}")
    return size


def utf8_size(text: str) -> int:
    """The UTF-8 length of ``text``, without encoding an ASCII-only one."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


DEFAULT_LIMITS = RequestLimits()
