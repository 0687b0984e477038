"""The module paths of ``sketchsyn.synth`` before its families became subpackages still import,
and every ``sketchsyn.synth`` path the docs, README or examples show a user resolves."""

from __future__ import annotations

import importlib
import pathlib
import re

import pytest

from sketchsyn.synth.moved import MOVED

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The public names (``__all__``) of the old modules that are now the family's package.
OLD_PACKAGE_NAMES = {
    "privhp": ["PrivHP"],
    "continual": ["ContinualPrivHP", "best_arity", "binary_levels"],
    "online": ["OnlineSynthesizer", "depth_at", "level_start"],
    "longitudinal": ["FixedWindowSynthesizer", "as_column"],
    "lowdim": ["LowDimDistribution", "LowDimSynthesizer"],
    "marginal": ["DEFAULT_MEMORY", "MarginalDistribution", "MarginalSynthesizer", "plan"],
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_flat_path_is_the_new_module(old: str) -> None:
    module = importlib.import_module(f"sketchsyn.synth.{old}")
    new = importlib.import_module(f"sketchsyn.synth.{MOVED[old]}")
    assert module is new
    assert module.__spec__.name == new.__name__  # its own spec, not the alias's
    for name in getattr(new, "__all__", []):
        exec(f"from sketchsyn.synth.{old} import {name}", {})


@pytest.mark.parametrize("old", sorted(OLD_PACKAGE_NAMES))
def test_old_module_that_became_a_package_keeps_its_names(old: str) -> None:
    package = importlib.import_module(f"sketchsyn.synth.{old}")
    assert hasattr(package, "__path__")
    for name in OLD_PACKAGE_NAMES[old]:
        assert getattr(package, name) is not None


def test_unknown_old_path_still_fails() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("sketchsyn.synth.no_such_module")


def _shown_paths() -> set[str]:
    texts = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").glob("*.py")]
    found: set[str] = set()
    for path in texts:
        text = path.read_text()
        found |= set(re.findall(r"sketchsyn\.synth(?:\.[a-z_]+)+", text))
        for module, names in re.findall(r"from (sketchsyn\.synth[\w.]*) import ([\w, ]+)", text):
            found |= {f"{module}:{n.strip()}" for n in names.split(",") if n.strip()}
    return found


def test_every_path_the_docs_show_resolves() -> None:
    shown = _shown_paths()
    assert any(p.startswith("sketchsyn.synth.privhp") for p in shown)  # the scan sees the docs
    for path in sorted(shown):
        module, _, name = path.partition(":")
        parts = module.split(".")
        # a dotted path may end in an attribute (``sketchsyn.synth.tree.combine_levels``)
        for cut in range(len(parts), 1, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
            break
        else:
            raise AssertionError(f"{module} does not import")
        if name:
            assert hasattr(obj, name), f"{module} has no {name}"


# Issue 50, item 15: "`dask.py`, `spark.py` and `distributed.py` sit beside `errors.py` and
# `attributes.py` [...] Put the distributed path in one package, and keep `sketchsyn.dask` and
# `sketchsyn.spark` as the user paths. Goal: at most 6 modules at the top of `sketchsyn/`."
KERNEL_MODULES = {"accel.py", "aot.py", "aot_build.py"}  # leave with the kernels issue (49)


def test_top_of_the_package_holds_at_most_six_modules() -> None:
    top = {p.name for p in (ROOT / "sketchsyn").glob("*.py")} - KERNEL_MODULES
    assert len(top) <= 6, sorted(top)
    assert (ROOT / "sketchsyn" / "distributed" / "protocol.py").exists()


@pytest.mark.parametrize("face", ["dask", "spark"])
def test_user_paths_of_the_distributed_faces_are_the_modules(face: str) -> None:
    home = importlib.import_module(f"sketchsyn.distributed.{face}")
    assert importlib.import_module(f"sketchsyn.{face}") is home
    exec(f"from sketchsyn import {face} as short", names := {})
    assert names["short"] is home
    for name in home.__all__:
        exec(f"from sketchsyn.{face} import {name}", {})
    assert home.__name__ == f"sketchsyn.distributed.{face}"  # what pickles name on workers
