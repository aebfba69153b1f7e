"""The SDK distribution (libs/pyproject.toml, ``cronwave``) installs the SDK alone:
``pip install ./libs`` into a fresh virtual environment brings none of the server's
distributions or packages, and its ``cronwave`` runs the client commands and says
what to install for a server one. Installed as a user would, from PyPI for its
dependencies."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The top-level packages of the server distribution (the root pyproject.toml): the
#: services', the bench's, the waterfall's and the server's commands.
SERVER_PACKAGES = (
    "cron_planner",
    "leader_election",
    "dispatcher",
    "workflow_store",
    "worker",
    "console",
    "cronwave_bench",
    "cronwave_server",
    "cronwave_waterfall",
)
SDK_PACKAGES = {"cronwave", "cronwave_core", "cronwave_proto"}
#: What the probe prints: the distributions installed, the SDK's top-level folders,
#: and which of the server's packages can be imported.
PROBE = f"""
import importlib.metadata as md, importlib.util, json
dists = sorted({{d.metadata["Name"].lower() for d in md.distributions()}})
files = md.distribution("cronwave").files or []
tops = sorted({{f.parts[0] for f in files if len(f.parts) > 1 and not f.parts[0].endswith(
    (".dist-info", ".data")) and f.parts[0] != ".."}})
found = [name for name in {SERVER_PACKAGES!r} if importlib.util.find_spec(name)]
import cronwave
print(json.dumps({{"dists": dists, "tops": tops, "server": found,
                  "client": cronwave.Client.__module__}}))
"""


def _name(requirement: str) -> str:
    """The normalized distribution name of a requirement (``"SQLAlchemy>=2"`` ->
    ``"sqlalchemy"``)."""
    name = re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def server_distributions() -> set[str]:
    """The server distribution and what it depends on beyond the SDK."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_name(project["name"])} | {_name(r) for r in project["dependencies"]} - {"cronwave"}


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` in ``cwd``: away from the checkout, whose build metadata a ``python -c``
    would find in its current folder."""
    return subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


def test_the_server_distribution_names_its_own_dependencies():
    found = server_distributions()

    assert {"cronwave-server", "sqlalchemy", "dramatiq", "redis", "alembic"} <= found
    assert "cronwave" not in found and "grpcio" not in found


@pytest.mark.slow
def test_pip_install_of_the_sdk_installs_no_server_package(tmp_path: Path) -> None:
    # Given a copy of libs/ (what `pip install ./libs` builds from) and a fresh venv
    source = tmp_path / "libs"
    shutil.copytree(
        ROOT / "libs",
        source,
        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"),
    )
    venv.create(tmp_path / "venv", with_pip=True)
    bin_dir = tmp_path / "venv" / "bin"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRONWAVE_", "PYTHON"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    # When the SDK is installed into it
    installed = run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--no-compile", str(source)],
        env,
        tmp_path,
    )
    assert installed.returncode == 0, installed.stderr

    # Then no distribution of the server is there, the SDK brings only its own
    # packages, and none of the server's can be imported
    probed = run([str(bin_dir / "python"), "-c", PROBE], env, tmp_path)
    assert probed.returncode == 0, probed.stderr
    facts = json.loads(probed.stdout.splitlines()[-1])
    assert "cronwave" in facts["dists"]
    assert sorted(server_distributions() & set(facts["dists"])) == []
    assert set(facts["tops"]) == SDK_PACKAGES
    assert facts["server"] == []
    assert facts["client"] == "cronwave._client"

    # And its `cronwave` runs a client command, shows the server's, and refuses them
    helped = run([str(bin_dir / "cronwave"), "--help"], env, tmp_path)
    previewed = run(
        [str(bin_dir / "cronwave"), "schedule", "preview", "--cron", "0 2 * * *", "--count", "2"],
        env,
        tmp_path,
    )
    refused = run(
        [str(bin_dir / "cronwave"), "up", "--data-dir", str(tmp_path / "d")], env, tmp_path
    )
    assert helped.returncode == 0, helped.stderr
    assert "up" in helped.stdout and "schedule" in helped.stdout
    assert previewed.returncode == 0, previewed.stderr
    assert len(previewed.stdout.splitlines()) == 2
    assert refused.returncode == 1
    assert "pip install 'cronwave[server]'" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "d").exists()
