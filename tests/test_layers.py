"""The layers hold: cronwave_core's domain modules do no I/O (they import nothing of
the infrastructure), no library imports a service, the SDK's job API imports nothing
heavy, and the examples (job packages, such as the billing demo's) are the SDK's and
the core's users: they import no service, and no library or service imports them; the
server's libraries and the core name none of them in their code either (the demo
commands are the billing example's, and the bench and ``cronwave up`` reach it through
entry points: ``cronwave.demos``, ``cronwave.processes``). In the
workflow-store, ``Store`` is a composition root: it inherits nothing and holds its
repositories, none of which inherits another; each repository calls only the
repositories ``Store`` hands it in its constructor (``REPOSITORIES``), and no module
but the root, the servicer and the benchmark seeder imports ``Store`` (the parts
beside it, such as the deadline sweep, the notifier and the slot rules, take narrow
ports)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBS = ROOT / "libs"
DOMAIN = LIBS / "cronwave_core" / "domain"
#: What a domain module may import of cronwave_core outside the domain: values only.
VALUE_MODULES = {"errors", "fields", "proto_enum", "wire"}
#: Infrastructure a domain module must not reach, directly.
INFRASTRUCTURE = ("grpc", "redis", "sqlalchemy", "dramatiq", "psycopg", "opentelemetry")
SERVICES = {p.name.replace("-", "_") for p in (ROOT / "services").iterdir() if p.is_dir()}
EXAMPLES = ROOT / "examples"
#: The top-level packages of the examples (examples/<example>/<package>/).
EXAMPLE_PACKAGES = {
    p.name for p in EXAMPLES.glob("*/*") if p.is_dir() and (p / "__init__.py").exists()
}
#: The server distribution's libraries and the core: their code names no example.
SERVER_LIBS = [LIBS / name for name in ("cronwave_server", "cronwave_bench", "cronwave_core")]
#: What names an example in code: its package, or the billing example's job type.
EXAMPLE_JOB_TYPES = {"billing.nightly"}
STORE_PACKAGE = ROOT / "services" / "workflow-store" / "workflow_store"
#: The workflow-store's repositories, by module: the class ``Store`` builds and holds,
#: and the repositories it calls, each handed to it in its constructor
#: (docs/architecture.md, *The workflow-store's parts*). Every part writes its audit
#: rows with ``audit_store.append`` in its own unit of work: no call of a repository.
REPOSITORIES: dict[str, tuple[str, set[str]]] = {
    "schedule_store": ("Schedules", {"job_types", "schedule_changes"}),
    "schedule_deletion": ("ScheduleDeletion", {"schedule_changes", "attempt_store"}),
    "schedule_changes": ("ScheduleChanges", set()),
    "job_types": ("JobTypes", set()),
    "run_store": ("Runs", {"job_types", "fencing"}),
    "attempt_store": ("Attempts", {"job_types"}),
    "fencing": ("Fencing", set()),
    "audit_store": ("AuditLog", set()),
    "sweep_store": ("Requeues", set()),
    "dead_letter_store": ("DeadLetters", set()),
    "deadline_store": ("DeadlineStore", set()),
}
#: What ``Store`` builds besides its repositories: the unit of work's factory.
STORE_PLUMBING = {"Transactions"}
#: The modules that import ``Store``: the root that builds it (``main``), the servicer
#: over it, and the benchmark seeder. Every other module (the repositories, and the
#: parts beside the store: the deadline sweep, the notifier, its relay and outbox, the
#: slot rules) reaches what it uses through the ports it is given.
STORE_USERS = {"main", "servicer", "bench_seed"}
#: The job author's API: what a job module imports, in the worker and in its own tests.
JOB_API = [
    LIBS / "cronwave" / f"{name}.py"
    for name in ("_job", "_job_context", "_job_errors", "_checkpoint", "_retry")
]
#: What the job API may import of cronwave_core: values with no I/O (a job's progress
#: is one; its proto conversion loads the messages only when the worker sends it; the
#: backoff formula a retry policy's delays come from is another).
JOB_API_CORE = {
    "cronwave_core.backoff",
    "cronwave_core.errors",
    "cronwave_core.fields",
    "cronwave_core.limits",
    "cronwave_core.domain.progress",
}


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it (a function's imports too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _crossings(path: Path) -> list[str]:
    """The imports of ``path`` that leave the domain, by module or package reached."""
    wrong: set[str] = set()
    for name in _imported(path):
        top, _, rest = name.partition(".")
        if top in INFRASTRUCTURE or top in ("cronwave", "cronwave_bench", "cronwave_waterfall"):
            wrong.add(top)
        elif top == "cronwave_core" and rest:
            first = rest.split(".")[0]
            if first != "domain" and first not in VALUE_MODULES:
                wrong.add(f"cronwave_core.{first}")
    return sorted(wrong)


@pytest.mark.parametrize("path", sorted(DOMAIN.glob("*.py")), ids=lambda p: p.name)
def test_a_domain_module_imports_no_infrastructure(path: Path) -> None:
    assert _crossings(path) == [], f"{path.relative_to(ROOT)} reaches past the domain"


def test_the_check_sees_a_crossing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from cronwave_core.rpc import open_channel\nimport redis\n"
        "def f():\n    from cronwave_core.telemetry.spans import hop_span\n"
    )
    assert _crossings(bad) == ["cronwave_core.rpc", "cronwave_core.telemetry", "redis"]


def test_no_library_imports_a_service() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted(LIBS.rglob("*.py"))
        if "cronwave_proto" not in path.parts
        for name in sorted(_imported(path))
        if name.split(".")[0] in SERVICES
    ]
    assert found == []


@pytest.mark.parametrize("path", JOB_API, ids=lambda p: p.name)
def test_the_job_api_imports_nothing_heavy(path: Path) -> None:
    heavy = sorted(
        name
        for name in _imported(path)
        if name.split(".")[0] in (*INFRASTRUCTURE, "grpc", "cronwave_proto")
        or (
            name.startswith("cronwave_core")
            and not any(name == core or name.startswith(core + ".") for core in JOB_API_CORE)
        )
    )
    assert heavy == [], f"{path.relative_to(ROOT)} imports more than the job API needs"


def test_no_library_or_service_imports_an_example_and_no_example_a_service() -> None:
    assert {"cronwave_billing"} <= EXAMPLE_PACKAGES
    libs_to_examples = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted([*LIBS.rglob("*.py"), *(ROOT / "services").rglob("*.py")])
        for name in sorted(_imported(path))
        if name.split(".")[0] in EXAMPLE_PACKAGES
    ]
    examples_to_services = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted(EXAMPLES.rglob("*.py"))
        for name in sorted(_imported(path))
        if name.split(".")[0] in SERVICES
    ]
    assert (libs_to_examples, examples_to_services) == ([], [])


def _names_an_example(path: Path) -> list[str]:
    """The strings of ``path``'s code (its docstrings aside) that name an example's
    package or job type."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    names = EXAMPLE_PACKAGES | EXAMPLE_JOB_TYPES
    return sorted(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and any(name in node.value for name in names)
    )


@pytest.mark.parametrize("lib", SERVER_LIBS, ids=lambda p: p.name)
def test_the_server_s_code_names_no_example(lib: Path) -> None:
    found = {
        str(path.relative_to(ROOT)): named
        for path in sorted(lib.rglob("*.py"))
        if (named := _names_an_example(path))
    }
    assert found == {}


def test_the_check_sees_an_example_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""Runs billing.nightly (a docstring may say so)."""\n'
        'JOB = "billing.nightly"\n'
        "def installed():\n"
        '    """Whether cronwave_billing is there."""\n'
        '    return find_spec("cronwave_billing")\n'
    )
    assert _names_an_example(bad) == ["billing.nightly", "cronwave_billing"]


def _reaches_the_store(path: Path) -> list[str]:
    """The imports of ``path`` that reach the whole store."""
    whole = ("workflow_store.store", "workflow_store.store.Store")
    return sorted(name for name in _imported(path) if name in whole)


def _store_modules() -> dict[str, Path]:
    return {path.stem: path for path in sorted(STORE_PACKAGE.glob("*.py"))}


def _classes() -> dict[str, ast.ClassDef]:
    """Every class of the workflow-store's modules, by module and name."""
    return {
        f"{module}.{node.name}": node
        for module, path in _store_modules().items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    }


def test_only_the_root_the_servicer_and_the_seeder_import_the_store() -> None:
    users = {name for name, path in _store_modules().items() if _reaches_the_store(path)}
    assert users == STORE_USERS


def test_the_check_sees_a_part_reaching_the_store(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from workflow_store.store_core import utc_now\n"
        "def f():\n    from workflow_store.store import Store\n"
    )
    assert _reaches_the_store(bad) == ["workflow_store.store", "workflow_store.store.Store"]


@pytest.mark.parametrize("module", sorted(REPOSITORIES))
def test_a_repository_calls_only_the_repositories_it_is_given(module: str) -> None:
    path = STORE_PACKAGE / f"{module}.py"
    called = {
        name.split(".")[1]
        for name in _imported(path)
        if name.startswith("workflow_store.") and name.split(".")[1] in REPOSITORIES
    } - {"audit_store", module}
    assert called == REPOSITORIES[module][1], f"{path.relative_to(ROOT)} calls other parts"


def test_no_class_inherits_a_repository_or_the_store() -> None:
    classes = _classes()
    repositories = {f"{module}.{cls}" for module, (cls, _) in REPOSITORIES.items()}
    assert repositories <= set(classes)
    heirs = {
        f"{name}({base.id})"
        for name, node in classes.items()
        for base in node.bases
        if isinstance(base, ast.Name)
        and base.id in {cls for cls, _ in REPOSITORIES.values()} | {"Store", "StoreCore"}
    }
    assert heirs == set()
    assert {name: len(classes[name].bases) for name in repositories} == dict.fromkeys(
        repositories, 0
    )
    assert not [name for name in classes if name.endswith(".StoreCore")]


def test_the_store_holds_its_repositories_and_hands_each_the_ones_it_calls() -> None:
    tree = ast.parse((STORE_PACKAGE / "store.py").read_text())
    (store,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Store"]
    built = {
        node.targets[0].attr: node.value
        for node in ast.walk(store)
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Attribute)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
    }
    module_of = {cls: module for module, (cls, _) in REPOSITORIES.items()}
    held = {attr: call.func.id for attr, call in built.items()}  # type: ignore[attr-defined]
    given = {
        module_of[held[attr]]: {
            module_of[held[arg.attr]]
            for arg in [*call.args, *(k.value for k in call.keywords)]
            if isinstance(arg, ast.Attribute) and held.get(arg.attr) in module_of
        }
        for attr, call in built.items()
        if held[attr] in module_of
    }
    assert store.bases == []
    assert set(held.values()) == set(module_of) | STORE_PLUMBING
    assert given == {module: calls for module, (_, calls) in REPOSITORIES.items()}
