"""The request limits' settings (``CRONWAVE_MAX_*``), one of the components of
``cronwave_core.settings`` (listed in its ``COMPONENTS``, in the configuration table)."""

from __future__ import annotations

from dataclasses import dataclass

from cronwave_core.config import Integer, setting, variables
from cronwave_core.errors import ConfigurationError
from cronwave_core.limits import LimitConflict, RequestLimits
from cronwave_core.settings_base import PREFIX, FromEnv


@dataclass(frozen=True, kw_only=True)
class LimitSettings(FromEnv):
    """Request limits (``cronwave_core.limits.RequestLimits``), checked by every service
    before anything is written; a request over one is refused `INVALID_ARGUMENT`
    naming the field, the limit and the size (see *Limits*)."""

    payload_bytes: int = setting(
        PREFIX + "MAX_PAYLOAD_BYTES",
        Integer(1_024, 2 * 1024 * 1024),
        256 * 1024,
        "a schedule's payload, in UTF-8 bytes of its JSON; with "
        "`CRONWAVE_MAX_RESULT_BYTES` and `CRONWAVE_MAX_CHECKPOINT_BYTES` at most 3 MiB, "
        "so that a run holding all three can be read under gRPC's 4 MiB",
    )
    id_chars: int = setting(
        PREFIX + "MAX_ID_CHARS",
        Integer(16, 255),
        128,
        "an id or name a caller chooses (run ids, idempotency keys, queues, workers, "
        "cursors, event kinds, job types), in characters of ASCII letters, digits and "
        "`. _ - : @ / + = #`; schedule ids keep their own pattern (at most 63)",
    )
    note_bytes: int = setting(
        PREFIX + "MAX_NOTE_BYTES",
        Integer(64, 65_536),
        1_024,
        "a note or reason (pause and resume notes, cancel and release reasons), in UTF-8 bytes",
    )
    page_size: int = setting(
        PREFIX + "MAX_PAGE_SIZE",
        Integer(1, 10_000),
        1_000,
        "the most items one page of `ListSchedules`, `ListDeadLetters` or "
        "`ListAuditEvents` may ask for",
    )
    backfill_slots: int = setting(
        PREFIX + "MAX_BACKFILL_SLOTS",
        Integer(1, 100_000),
        10_000,
        "the most fire times one backfill may cover",
    )
    result_bytes: int = setting(
        PREFIX + "MAX_RESULT_BYTES",
        Integer(1_024, 2 * 1024 * 1024),
        1024 * 1024,
        "a run's result, in UTF-8 bytes of its JSON: a job returning more ends its run "
        "`FAILED` (`ResultTooLarge`, not retried), and the store refuses more",
    )
    checkpoint_bytes: int = setting(
        PREFIX + "MAX_CHECKPOINT_BYTES",
        Integer(1_024, 2 * 1024 * 1024),
        1024 * 1024,
        "a run's checkpoint, in UTF-8 bytes of its JSON: `ctx.checkpoint.save` (and "
        "`ctx.heartbeat`) with more raises `InvalidArgument` in the job, and the store "
        "refuses more",
    )
    receive_bytes: int = setting(
        PREFIX + "MAX_RECEIVE_BYTES",
        Integer(4 * 1024 * 1024, 256 * 1024 * 1024),
        16 * 1024 * 1024,
        "the workflow-store's gRPC receive cap (`max_receive_message_length`): above "
        "every limit here, so that an oversized field reaches the servicer and is refused "
        "by name; at least 4 times each of `CRONWAVE_MAX_PAYLOAD_BYTES`, "
        "`CRONWAVE_MAX_RESULT_BYTES` and `CRONWAVE_MAX_CHECKPOINT_BYTES` (the other "
        "services' caps are fixed, see *Limits*)",
    )

    def limits(self) -> RequestLimits:
        """The limits these settings describe; a combination that breaks a rule stops
        start-up."""
        try:
            return RequestLimits(
                payload_bytes=self.payload_bytes,
                id_chars=self.id_chars,
                note_bytes=self.note_bytes,
                page_size=self.page_size,
                backfill_slots=self.backfill_slots,
                result_bytes=self.result_bytes,
                checkpoint_bytes=self.checkpoint_bytes,
                receive_bytes=self.receive_bytes,
            )
        except LimitConflict as exc:
            names = dict(variables(LimitSettings))
            named = ", ".join(names[f].name for f in exc.fields)
            raise ConfigurationError(f"{named}: {exc}") from None
