"""Poison messages and runs whose retries are spent land on the dead-letter list with
their reason and last error; ``cronwave dlq replay`` runs a dead-lettered run again.
The tests share one rig (``shared_rig``): each finds its own letters by their content."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from typer.testing import CliRunner

from cronwave.cli.main import app
from cronwave_core.convert import td_to_duration
from cronwave_core.queueing import RunMessage, actor_name_for
from tests.harness.cluster import MakeRig, Rig
from tests.helpers import eventually
from tests.reliability.support import events_of, lifecycle

pytestmark = pytest.mark.slow


def cli(rig: Rig, *args: str) -> str:
    env = {"CRONWAVE_STORE_ADDR": rig.suite.store_addr, "CRONWAVE_RPC_TIMEOUT": "10"}
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, (args, result.stdout, result.stderr, result.exception)
    return result.stdout


def letter_for(rig: Rig, what: str, match: object) -> store_pb.DeadLetter:
    def check() -> store_pb.DeadLetter:
        letters = [d for d in rig.dead_letters() if match(d)]  # type: ignore[operator]
        assert letters, f"no dead letter for {what}; have {rig.dead_letters()}"
        return letters[0]

    return eventually(check, timeout=20, what=f"dead letter for {what}")


def test_poison_messages_are_dead_lettered_with_their_reason(shared_rig: MakeRig) -> None:
    rig = shared_rig()
    actor = actor_name_for("default")
    # Given a job type the store knows but no worker of its pool runs
    rig.store.RegisterJobType(
        store_pb.RegisterJobTypeRequest(
            job_type=common_pb2.JobType(
                name="drill.ghost",
                duration_limit=td_to_duration(timedelta(minutes=1)),
                queue="default",
            )
        ),
        timeout=10,
    )
    ghost_run = rig.start(rig.schedule("drill.ghost")).run.run_id

    # When garbage is put on the worker's queue through the broker
    rig.enqueue_raw("default", actor, (), {"hello": "world"})
    rig.enqueue_raw("default", actor, ("positional",), {})
    nosuch = RunMessage(
        run_id="run_nosuchrun",
        schedule_id="nightly",
        fire_time=datetime.now(UTC),
        job_type="cronwave.noop",
        queue="default",
    )
    rig.enqueue_raw("default", actor, (), nosuch.to_kwargs())
    rig.enqueue_raw("default", "cronwave_run__nowhere", (), {"run_id": "run_nowhere"})

    # Then each lands on the dead-letter list with its reason
    garbage = letter_for(rig, "garbage kwargs", lambda d: '"hello"' in d.message_json)
    assert garbage.reason == "undecodable" and garbage.error.startswith("undecodable run message")
    positional = letter_for(rig, "positional args", lambda d: "positional" in d.message_json)
    assert positional.reason == "undecodable" and "args" in positional.error
    unknown = letter_for(rig, "unknown run", lambda d: d.run_id == "run_nosuchrun")
    assert unknown.reason == "unknown_run" and "no run 'run_nosuchrun'" in unknown.error
    rejected = letter_for(rig, "unknown actor", lambda d: d.run_id == "run_nowhere")
    assert rejected.reason == "rejected" and "ActorNotFound" in rejected.error
    assert "cronwave_run__nowhere" in rejected.message_json
    ghost = letter_for(rig, "unknown job type", lambda d: d.run_id == ghost_run)
    assert ghost.reason == "unknown_job_type" and "no job type 'drill.ghost'" in ghost.error
    assert (ghost.job_type, ghost.attempt) == ("drill.ghost", 1)
    assert rig.state(ghost_run) == "DEAD_LETTERED"
    assert events_of(rig.run_events(ghost_run), "dead_lettered")[0].detail.startswith(
        "unknown_job_type: "
    )
    # and the CLI lists them
    listed = cli(rig, "dlq", "list")
    for reason in ("undecodable", "unknown_run", "rejected", "unknown_job_type", ghost_run):
        assert reason in listed
    # and the worker goes on running runs
    ok = rig.start(rig.schedule("cronwave.noop")).run.run_id
    assert rig.wait_state(ok, "SUCCEEDED").state == common_pb2.RUN_STATE_SUCCEEDED


def test_spent_retries_dead_letter_the_run_and_replay_runs_it_again(shared_rig: MakeRig) -> None:
    # Given a job that fails its four allowed attempts, and succeeds from the fifth
    rig = shared_rig()
    schedule_id = rig.schedule("drill.flaky", {"succeed_at_attempt": 5})
    run_id = rig.start(schedule_id).run.run_id

    # Then after four attempts the run is dead-lettered with its last error
    run = rig.wait_state(run_id, "DEAD_LETTERED", timeout=30)
    assert run.attempt == 4
    letter = letter_for(rig, "spent retries", lambda d: d.run_id == run_id)
    assert letter.reason == "retries_exhausted"
    assert letter.error == "Flaky: attempt 4 failed (failed 4 of 4 allowed attempt(s))"
    listed = cli(rig, "dlq", "list")
    assert run_id in listed and "retries_exhausted" in listed

    # When it is replayed
    replayed = cli(rig, "dlq", "replay", run_id)
    assert f"run {run_id} replayed: PENDING" in replayed

    # Then the sweeper sends it again and its fifth attempt succeeds
    done = rig.wait_state(run_id, "SUCCEEDED", timeout=30)
    assert json.loads(done.result_json) == {"attempt": 5}
    kinds = lifecycle(rig.run_events(run_id))
    tail = kinds[kinds.index("dead_lettered") :]
    assert tail == ["dead_lettered", "replayed", "requeued", "claimed", "succeeded"]
    requeued = events_of(rig.run_events(run_id), "requeued")[-1]
    assert requeued.detail == "replayed"
    # and the entry is no longer on the list, except when asked for replayed ones
    assert not [d for d in rig.dead_letters() if d.run_id == run_id]
    assert "(replayed)" in cli(rig, "dlq", "list", "--all")
    # and replaying a run that is not dead-lettered is refused, naming why
    result = CliRunner().invoke(
        app, ["dlq", "replay", run_id], env={"CRONWAVE_STORE_ADDR": rig.suite.store_addr}
    )
    assert result.exit_code == 1 and "is not dead-lettered" in result.stderr
