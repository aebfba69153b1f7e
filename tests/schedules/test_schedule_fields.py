"""The table of a schedule's fields (``cronwave_core.domain.schedule_fields``) is read
from ``Spec`` and ``Policy``; these tests hold it to the proto, and each edge that
spells a field (the store's JSON, the SDK, the CLI, ``apply -f``, ``-o json``) to the
table, so that a field added to the dataclass and the proto cannot be left out of
one of them unnoticed."""

from __future__ import annotations

import dataclasses

import pytest
from cronwave_proto.v1 import common_pb2 as pb

from cronwave_core.domain.schedule_fields import FIELDS, POLICY_FIELDS, SPEC_FIELDS, Kind
from cronwave_core.domain.spec import Policy, Spec
from tests.schedules.field_samples import SAMPLES, every_field_set


def test_the_table_has_every_field_of_the_proto_messages_by_the_same_name():
    assert [f.name for f in SPEC_FIELDS] == [f.name for f in pb.ScheduleSpec.DESCRIPTOR.fields]
    assert [f.name for f in POLICY_FIELDS] == [f.name for f in pb.SchedulePolicy.DESCRIPTOR.fields]


def test_the_table_is_the_dataclasses_fields_with_their_defaults():
    assert [f.name for f in SPEC_FIELDS] == [f.name for f in dataclasses.fields(Spec)]
    assert [f.name for f in POLICY_FIELDS] == [f.name for f in dataclasses.fields(Policy)]
    assert {f.name: f.default for f in SPEC_FIELDS} == dataclasses.asdict(Spec())
    for f in FIELDS:
        assert f.help, f"{f.path} needs a help text (the CLI's --help shows it)"
        assert f.option.startswith("--")
        assert (f.enum is not None) == (f.kind is Kind.ENUM)


@pytest.mark.parametrize("kind", [k for k in Kind if k is not Kind.ENUM])
def test_every_kind_has_a_sample_value_for_the_edge_tests(kind: Kind):
    assert kind in SAMPLES  # an enum's sample is one of its members


def test_a_spec_and_policy_with_every_field_set_differ_from_the_defaults_in_each():
    spec, policy = every_field_set()
    for f in SPEC_FIELDS:
        assert getattr(spec, f.name) != f.default, f.path
    for f in POLICY_FIELDS:
        assert getattr(policy, f.name) != f.default, f.path


def test_a_type_no_kind_covers_is_refused_naming_the_field():
    from cronwave_core.domain.schedule_fields import _kind

    with pytest.raises(TypeError, match=r"Spec\.odd has type .*add a Kind"):
        _kind(Spec, "odd", complex)


@pytest.mark.parametrize("command", ["create", "update"])
def test_the_cli_has_an_option_for_every_field(command: str):
    import typer

    from cronwave.cli.schedule import app

    click_command = typer.main.get_command(app).commands[command]
    options = {opt for param in click_command.params for opt in param.opts}
    assert {f.option for f in FIELDS} <= options


def test_the_sdk_takes_every_field_as_a_keyword_and_masks_it_by_its_path():
    import inspect

    from cronwave import Client
    from cronwave._spec_input import policy_of, spec_of
    from cronwave._update_input import update_of

    keywords = {f.keyword for f in FIELDS}
    for call in (Client.create_schedule, Client.update_schedule):
        assert keywords <= set(inspect.signature(call).parameters), call.__qualname__
    assert {f.keyword for f in SPEC_FIELDS} == set(inspect.signature(spec_of).parameters)
    assert {f.keyword for f in POLICY_FIELDS} | {"notify_format"} == set(
        inspect.signature(policy_of).parameters
    )
    spec, policy = every_field_set()
    given = {f.keyword: getattr(spec if f.part == "spec" else policy, f.name) for f in FIELDS}
    given["notify"] = [n.url for n in policy.notifiers]
    for f in FIELDS:
        if f.kind is Kind.ENUM:
            given[f.keyword] = str(given[f.keyword])
    _, paths = update_of("s", **given)
    assert sorted(paths) == sorted(f.path for f in FIELDS)
