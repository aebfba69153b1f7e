"""``cronwave schedule show -o yaml`` writes the ``apply -f`` file that declares the
schedule as it is: applied back, it changes nothing, and applied under another id it
makes the same schedule. Every spec and policy field is sent through (the samples of
``tests/schedules/field_samples.py``, one per field of the table)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cronwave.cli._apply_file import read
from cronwave.cli._field_forms import CODECS, duration_text
from cronwave.cli._schedule_args import parse_duration
from cronwave.cli.main import app
from cronwave_core.domain.schedule_fields import Kind
from tests.cli.test_cli_suite import env_for, ok
from tests.harness.clients import client_for
from tests.helpers import fresh
from tests.schedules.field_samples import every_field_set


@pytest.mark.parametrize("form", sorted(CODECS))
def test_each_form_has_a_codec_for_every_kind(form: str):
    assert set(CODECS[form]) == set(Kind)


@pytest.mark.parametrize(
    "micros", [1, 7, 250_000, 1_500_000, 90_000_000, 600_000_000, 86_400_000_000 * 2]
)
def test_a_duration_is_written_as_text_that_reads_back_exactly(micros: int):
    from datetime import timedelta

    value = timedelta(microseconds=micros)
    assert parse_duration(duration_text(value), "d") == value


def test_every_field_written_as_an_entry_reads_back_as_the_same_spec_and_policy(tmp_path: Path):
    spec, policy = every_field_set()
    entry = {"id": "all-fields", "job_type": "cronwave.noop"}
    from cronwave.cli._field_forms import yaml_fields

    entry.update(yaml_fields(spec, policy))
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump({"schedules": [entry]}), encoding="utf-8")

    (declared,) = read(path).schedules

    assert declared.spec == spec and declared.policy == policy


@pytest.mark.slow
def test_show_as_yaml_applied_back_changes_nothing_and_makes_the_same_schedule(make_suite):
    suite = make_suite()
    env = env_for(suite)
    spec, policy = every_field_set()
    sid = fresh("yaml")
    with client_for(suite) as client:
        client.create_schedule(
            sid,
            spec,
            policy,
            job_type="cronwave.noop",
            payload={"customers": 3},
            paused=True,
            labels={"team": "billing"},
        )
    text = ok(["schedule", "show", sid, "-o", "yaml"], env)
    # (the first apply adopts the hand-made schedule: its manager is all it changes)
    adopted = CliRunner().invoke(app, ["apply", "-f", "-"], env=env, input=text)
    assert adopted.exit_code == 0, (adopted.stdout, adopted.stderr)
    with client_for(suite) as client:
        owned = client.get_schedule(sid)
    assert (owned.spec, owned.policy, owned.managed_by) == (spec, policy, "apply:default")
    text = ok(["schedule", "show", sid, "-o", "yaml"], env)

    result = CliRunner().invoke(app, ["apply", "-f", "-"], env=env, input=text)
    assert result.exit_code == 0, (result.stdout, result.stderr)

    copy = fresh("yaml-copy")
    again = CliRunner().invoke(
        app, ["apply", "-f", "-"], env=env, input=text.replace(f"id: {sid}", f"id: {copy}")
    )
    assert again.exit_code == 0, (again.stdout, again.stderr)
    with client_for(suite) as client:
        kept, twin = client.get_schedule(sid), client.get_schedule(copy)
    assert kept.revision == owned.revision and kept.spec == spec and kept.policy == policy
    assert (twin.spec, twin.policy, twin.payload, twin.paused, twin.labels) == (
        spec,
        policy,
        {"customers": 3},
        True,
        {"team": "billing"},
    )
