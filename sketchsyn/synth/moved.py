"""The flat module paths of ``sketchsyn.synth`` before its families became subpackages.

``import sketchsyn.synth.distribution`` and ``from sketchsyn.synth.pmm import PMM`` keep working:
a finder on ``sys.meta_path`` answers each old dotted path with the module at its new home (the
same module object, so classes and functions are identical under either name). Old paths that
became packages (``privhp``, ``continual``, ``online``, ``longitudinal``, ``lowdim``,
``marginal``) need no alias: each package re-exports its old module's public names.
``CHANGELOG.md`` lists every move.

>>> import importlib
>>> old = importlib.import_module("sketchsyn.synth.pmm")
>>> old is importlib.import_module("sketchsyn.synth.offline.pmm")
True
>>> from sketchsyn.synth.continual_noise import best_arity
>>> best_arity.__module__
'sketchsyn.synth.continual.noise'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

__all__ = ["MOVED", "install"]

# Old module of sketchsyn.synth → its new home (relative to sketchsyn.synth).
MOVED = {
    "assign": "longitudinal.assign",
    "bank": "privhp.bank",
    "continual_hybrid": "continual.hybrid",
    "continual_io": "continual.state",
    "continual_noise": "continual.noise",
    "continual_plan": "continual.plan",
    "continual_release": "continual.release",
    "cumulative": "longitudinal.cumulative",
    "histogram": "offline.histogram",
    "lowdim_release": "lowdim.release",
    "marginal_model": "marginal.model",
    "online_budget": "online.budget",
    "online_release": "online.release",
    "planner": "privhp.planner",
    "pmm": "offline.pmm",
    "private_pca": "lowdim.private_pca",
    "psmm": "offline.psmm",
    "release": "privhp.release",
    "sizing": "privhp.sizing",
    "streaming_privtree": "continual.streaming_privtree",
}

_PACKAGE = __name__.rpartition(".")[0]


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``sketchsyn.synth.<old>`` and loads it as the module at its new home."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, old = fullname.rpartition(".")
        if package != _PACKAGE or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(f"{_PACKAGE}.{MOVED[spec.name.rpartition('.')[2]]}")
        self._own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system has just set ``__spec__`` to the alias's: give the module its own back.
        module.__spec__ = self._own_spec


_FINDER = _MovedFinder()


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (``import sketchsyn.synth`` calls it)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_FINDER)
