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
