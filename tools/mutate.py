"""Mutation check: break one guarantee at a time and see that the test written for it
fails. Run by hand or with `make mutate`, never in `make test` (each mutation runs its
tests against real processes).

    python tools/mutate.py            # every mutation
    python tools/mutate.py fencing    # those whose name contains "fencing"

Each mutation replaces exact text in our code (failing loudly when the text is not
there, so a stale mutation cannot pass for a caught one), runs the tests named for
it, and restores the file whatever happens. A mutation is *caught* when those tests
fail. The table printed at the end lists each mutation, its tests and the result;
the exit status is non-zero when any mutation survived.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORE = "services/workflow-store/workflow_store"


@dataclass(frozen=True)
class Edit:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str
    edits: tuple[Edit, ...]
    tests: tuple[str, ...]


MUTATIONS = (
    Mutation(
        "slot-unique-per-token",
        "a slot is unique per (schedule, fire time, fencing token): a newer leader can "
        "create a second run for a slot",
        (
            Edit(
                f"{STORE}/migrations/versions/0001_initial_schema.py",
                'sa.UniqueConstraint("schedule_id", "fire_time", name=',
                'sa.UniqueConstraint("schedule_id", "fire_time", "fencing_token", name=',
            ),
            Edit(
                f"{STORE}/run_store.py",
                'index_elements=["schedule_id", "fire_time"]',
                'index_elements=["schedule_id", "fire_time", "fencing_token"]',
            ),
            Edit(
                f"{STORE}/run_store.py",
                "ON CONFLICT (schedule_id, fire_time) DO NOTHING",
                "ON CONFLICT (schedule_id, fire_time, fencing_token) DO NOTHING",
            ),
        ),
        ("tests/workflow_store/test_slot_across_tokens.py",),
    ),
    Mutation(
        "zombie-completion",
        "a completion from a superseded attempt is applied",
        (
            Edit(
                f"{STORE}/attempt_store.py",
                """            if not same_token(req.attempt_token, run["attempt_token"]):
                results.append(StaleAttempt(req.run_id, run["attempt"], run["state"]))
                continue
""",
                "",
            ),
        ),
        ("tests/reliability/test_zombie_completion.py",),
    ),
    Mutation(
        "billing-key-per-process",
        "the billing idempotency key differs per job process, so a resumed attempt charges again",
        (
            Edit(
                "examples/billing/cronwave_billing/gateway_client.py",
                'return f"inv-{invoice_id}"',
                "return f\"inv-{invoice_id}-{__import__('os').getpid()}\"",
            ),
        ),
        (
            "tests/billing/test_billing_job.py::"
            "test_a_crash_between_the_charge_and_its_record_heals_on_resume",
            "tests/billing/test_kill_recovery.py::"
            "test_a_worker_dead_between_charge_and_record_is_resumed_by_another_without_a_second_charge",
        ),
    ),
    Mutation(
        "catchup-cap-unrecorded",
        "late slots over the catch-up cap are dropped without a MISSED record",
        (
            Edit(
                "libs/cronwave_core/domain/catchup.py",
                "[Missed(at, CATCHUP_CAP, slot) for at, slot in capped]",
                "[]",
            ),
        ),
        ("tests/cron_planner/test_fire_loop.py::test_a_late_slot_follows_the_catchup_policy",),
    ),
    Mutation(
        "fencing-unissued-accepted",
        "the store accepts a fencing token it never issued (2^63-1, newest+1, a made-up scope)",
        (
            Edit(
                f"{STORE}/fencing.py",
                "        if token > issued:\n",
                "        if token > issued and False:\n",
            ),
        ),
        (
            "tests/leader_election/test_leader_election.py::test_a_forged_token_is_refused_and_elections_go_on",
        ),
    ),
    Mutation(
        "fencing-stale-accepted",
        "the store accepts a token older than the newest it has seen",
        (
            Edit(
                f"{STORE}/fencing.py",
                "        if token < newest:\n",
                "        if token < newest and False:\n",
            ),
        ),
        (
            "tests/workflow_store/test_runs.py::"
            "test_stale_fencing_token_is_refused_and_nothing_written",
            "tests/workflow_store/test_slot_across_tokens.py",
        ),
    ),
    Mutation(
        "attempt-token-guessable",
        "attempt tokens are predictable",
        (
            Edit(
                f"{STORE}/ids.py",
                "    return secrets.token_hex(16)\n",
                '    return "0" * 32\n',
            ),
        ),
        ("tests/workflow_store/test_attempts.py::test_attempt_tokens_cannot_be_guessed_or_read",),
    ),
    Mutation(
        "non-retryable-subclass",
        "a job process reports only an error's own type name, so a subclass of "
        "NonRetryable is retried",
        (
            Edit(
                "services/worker/worker/job_body.py",
                '"error_types": list(error_types(exc)),',
                '"error_types": [type(exc).__name__],',
            ),
        ),
        (
            "tests/reliability/test_job_processes.py::"
            "test_a_subclass_of_non_retryable_raised_in_a_job_process_fails_the_run_at_once",
        ),
    ),
    Mutation(
        "stale-resign",
        "a Resign with an old token of the holder (after it campaigned again) frees its "
        "current lease",
        (
            Edit(
                "services/leader-election/leader_election/leases.py",
                "if status ~= nil then\n  return {status, lease[1], 0, redis.call('PTTL', "
                "KEYS[1]), tonumber(lease[4])}\nend\nredis.call('DEL'",
                "if status ~= nil and status ~= 0 then\n  return {status, lease[1], 0, "
                "redis.call('PTTL', KEYS[1]), tonumber(lease[4])}\nend\nredis.call('DEL'",
            ),
        ),
        (
            "tests/leader_election/test_leader_election.py::"
            "test_a_stale_resign_by_the_holder_leaves_its_newer_lease_alone",
        ),
    ),
    Mutation(
        "prune-by-prefix",
        "apply --prune of manager 'team' deletes the schedules of manager 'team-b'",
        (
            Edit(
                "libs/cronwave/cli/_apply_plan.py",
                "if schedule.managed_by == file.marker and",
                "if schedule.managed_by.startswith(file.marker) and",
            ),
        ),
        (
            "tests/cli/test_apply_file.py::"
            "test_prune_never_touches_a_manager_whose_name_this_one_prefixes",
            "tests/cli/test_cli_lifecycle.py::"
            "test_apply_creates_updates_prunes_its_own_and_is_idempotent",
        ),
    ),
    Mutation(
        "key-cache-ttl-ignored",
        "the services but the store trust a checked API key for the default 10 s, not "
        "the configured CRONWAVE_AUTH_CACHE_TTL",
        (
            Edit(
                "libs/cronwave_core/bootstrap.py",
                "check_key = CachedKeyCheck(remote, tls.auth_cache_ttl)",
                "check_key = CachedKeyCheck(remote, timedelta(seconds=10))",
            ),
        ),
        ("tests/security/test_callers.py::test_a_revoked_key_is_refused_within_its_cache_time",),
    ),
    Mutation(
        "key-cache-hit-extends",
        "a cache hit extends a checked API key's life, so a revoked key in steady use is "
        "never refused",
        (
            Edit(
                "libs/cronwave_core/security/keys.py",
                "                return self._answers[digest][1]\n",
                "                hit = self._answers[digest]\n"
                "                self._answers[digest] = (self._clock(), hit[1])\n"
                "                return hit[1]\n",
            ),
        ),
        (
            "tests/security/test_keys.py::"
            "test_an_answer_is_trusted_for_the_ttl_from_when_it_was_asked_and_no_longer",
            "tests/security/test_callers.py::test_a_revoked_key_is_refused_within_its_cache_time",
        ),
    ),
    Mutation(
        "role-one-below-admitted",
        "a key one role below a method's least role is admitted (viewer pauses, operator deletes)",
        (
            Edit(
                "libs/cronwave_core/security/rules.py",
                "return ROLES.index(identity.role) >= ROLES.index(self.role)",
                "return ROLES.index(identity.role) + 1 >= ROLES.index(self.role)",
            ),
        ),
        (
            "tests/security/test_callers.py::"
            "test_every_role_gated_rpc_refuses_the_role_below_and_admits_its_own",
        ),
    ),
    Mutation(
        "role-at-minimum-refused",
        "a key of exactly a method's least role is refused",
        (
            Edit(
                "libs/cronwave_core/security/rules.py",
                "return ROLES.index(identity.role) >= ROLES.index(self.role)",
                "return ROLES.index(identity.role) > ROLES.index(self.role)",
            ),
        ),
        (
            "tests/security/test_callers.py::"
            "test_every_role_gated_rpc_refuses_the_role_below_and_admits_its_own",
        ),
    ),
    Mutation(
        "on-behalf-of-any-service",
        "every service's word on whom it acts for is taken, not only a relay's: a worker's "
        "certificate writes audit rows in a person's name",
        (
            Edit(
                "libs/cronwave_core/security/authz.py",
                'if identity is not None and identity.kind == "service" '
                "and identity.name in RELAYS:",
                'if identity is not None and identity.kind == "service":',
            ),
        ),
        (
            "tests/security/test_callers.py::"
            "test_on_behalf_of_from_no_relay_and_with_a_users_key_changes_nothing_in_the_audit",
        ),
    ),
    Mutation(
        "on-behalf-of-with-a-key",
        "a caller with an API key names whom it acts for, and the audit trail believes it",
        (
            Edit(
                "libs/cronwave_core/security/authz.py",
                "            return identity\n        identity = certificate_identity(",
                "            return dataclasses.replace(\n"
                "                identity,\n"
                "                on_behalf_of=_metadata("
                "context.invocation_metadata(), ON_BEHALF_OF),\n"
                "            )\n"
                "        identity = certificate_identity(",
            ),
        ),
        (
            "tests/security/test_callers.py::"
            "test_on_behalf_of_from_no_relay_and_with_a_users_key_changes_nothing_in_the_audit",
        ),
    ),
    Mutation(
        "deadline-judges-manual-runs",
        "the deadline sweep judges a manual run as a slot: a person's trigger that fails "
        "is a breach, counted and posted",
        (
            Edit(
                f"{STORE}/deadline_store.py",
                "_PLANNED = (Trigger.SCHEDULED.value, Trigger.CATCHUP.value)",
                "_PLANNED = (Trigger.SCHEDULED.value, Trigger.CATCHUP.value, Trigger.MANUAL.value)",
            ),
        ),
        ("tests/deadlines/test_deadline_triggers.py",),
    ),
    Mutation(
        "deadline-judges-backfill-runs",
        "the deadline sweep judges a backfill's runs as planned slots",
        (
            Edit(
                f"{STORE}/deadline_store.py",
                "_PLANNED = (Trigger.SCHEDULED.value, Trigger.CATCHUP.value)",
                "_PLANNED = (Trigger.SCHEDULED.value, Trigger.CATCHUP.value, "
                "Trigger.BACKFILL.value)",
            ),
        ),
        ("tests/deadlines/test_deadline_triggers.py",),
    ),
    Mutation(
        "id-length-off-by-one",
        "an id, key or name one character past its limit is accepted",
        (
            Edit(
                "libs/cronwave_core/limits.py",
                "        if len(value) > self.id_chars:\n",
                "        if len(value) > self.id_chars + 1:\n",
            ),
        ),
        (
            "tests/errors/test_id_fields.py::"
            "test_every_id_key_and_name_refuses_a_foreign_character_and_one_too_many",
        ),
    ),
    Mutation(
        "id-field-unchecked",
        "one id field of one RPC (a claim's worker id) is taken without its rule",
        (
            Edit(
                f"{STORE}/convert.py",
                'worker_id=validate.name(msg.worker_id, "worker_id"),',
                "worker_id=msg.worker_id,",
            ),
        ),
        (
            "tests/errors/test_id_fields.py::"
            "test_every_id_key_and_name_refuses_a_foreign_character_and_one_too_many",
        ),
    ),
)


def _apply(edits: tuple[Edit, ...]) -> dict[Path, str]:
    """Make ``edits``; the original text of every file touched."""
    originals: dict[Path, str] = {}
    try:
        for edit in edits:
            path = ROOT / edit.path
            current = path.read_text()
            originals.setdefault(path, current)
            if edit.old not in current:
                raise SystemExit(f"{edit.path}: the text to mutate is not there: {edit.old!r}")
            path.write_text(current.replace(edit.old, edit.new, 1))
    except BaseException:
        _restore(originals)
        raise
    return originals


def _restore(originals: dict[Path, str]) -> None:
    for path, text in originals.items():
        path.write_text(text)


def run(mutation: Mutation) -> tuple[bool, float, str]:
    """Apply ``mutation``, run its tests, restore; (caught, seconds, last line)."""
    originals = _apply(mutation.edits)
    began = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutation.tests],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        _restore(originals)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    failed = [line.split()[1] for line in lines if line.startswith(("FAILED ", "ERROR "))]
    said = f"{lines[-1] if lines else ''}; caught by {', '.join(failed)}" if failed else ""
    return proc.returncode != 0, time.monotonic() - began, said or (lines[-1] if lines else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="run the mutations whose name contains these")
    opts = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not opts.only or any(o in m.name for o in opts.only)]
    survived = 0
    rows = []
    for mutation in chosen:
        print(f"mutation {mutation.name}: {mutation.what}", flush=True)
        caught, seconds, last = run(mutation)
        survived += not caught
        rows.append((mutation.name, "caught" if caught else "SURVIVED", seconds, last))
        print(f"  {'caught' if caught else 'SURVIVED'} in {seconds:.0f}s: {last}", flush=True)
    print("\n| mutation | result | seconds | tests said |\n|---|---|---|---|")
    for name, result, seconds, last in rows:
        print(f"| {name} | {result} | {seconds:.0f} | {last} |")
    return 1 if survived else 0


if __name__ == "__main__":
    raise SystemExit(main())
