"""The committed generated code is what tools/gen_protos.py makes from protos/ now."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_protos", ROOT / "tools" / "gen_protos.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    # Given the generator and the protos as committed
    gen = _load_generator()
    # When it generates into an empty directory
    gen.generate(tmp_path)
    # Then every file matches the committed one, and there are no extra or missing files,
    # for cronwave's protos and for each job package's under examples/
    assert {source.package for source in gen.SOURCES} >= {"cronwave_proto", "cronwave_billing"}
    for source in gen.SOURCES:
        fresh = {p.name: p.read_bytes() for p in (tmp_path / source.package / "v1").iterdir()}
        committed_dir = source.out_root / source.package / "v1"
        committed = {
            p.name: p.read_bytes()
            for p in committed_dir.iterdir()
            if p.is_file() and p.suffix in (".py", ".pyi")
        }
        stale = sorted(
            n for n in fresh.keys() | committed.keys() if fresh.get(n) != committed.get(n)
        )
        assert not stale, f"generated code is stale: {stale}; run `make gen` and commit the result"


def test_every_service_has_its_proto() -> None:
    protos = {p.stem for p in (ROOT / "protos" / "cronwave" / "v1").glob("*.proto")}
    # The console is a web application: it serves HTTP, not a gRPC API of its own.
    services = {
        p.name.replace("-", "_")
        for p in (ROOT / "services").iterdir()
        if p.is_dir() and p.name != "console"
    }
    assert {f"{s}_service" for s in services} <= protos
    assert "common" in protos
