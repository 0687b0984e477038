"""The package's layers: each subpackage imports only from the layers below it, no module-level
import cycle, and no module over the size a newcomer can read."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "sketchsyn"

# Lowest first: a package may import from its own layer and the ones above it in this list.
LAYERS = [
    {"errors", "attributes", "kernels"},
    {"privacy"},
    {"domains"},
    {"io"},
    {"sketches"},
    {"counters"},
    {"units"},
    {"synth"},
    {"baselines"},
    {"evaluate"},
    {"cli", "distributed", "dask", "spark", "__main__", "__init__"},
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
MAX_LINES = 800  # the guide: about 800 lines at most

# Inside synth/, lowest first: the shared modules at its top, then one subpackage per family. A
# family imports only the shared modules, itself and the families before it; the shared modules
# import no family.
SYNTH_SHARED = {"tree", "distribution", "moved"}
SYNTH_FAMILIES = ["offline", "privhp", "continual", "online", "longitudinal", "lowdim", "marginal"]


def _modules() -> list[pathlib.Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def _dotted(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: pathlib.Path, module_level_only: bool) -> set[str]:
    """The sketchsyn modules ``path`` imports (absolute dotted names)."""
    package = _dotted(path) if path.name == "__init__.py" else _dotted(path).rpartition(".")[0]
    return _imports_of(path.read_text(), package, module_level_only)


def _imports_of(source: str, package: str, module_level_only: bool) -> set[str]:
    tree = ast.parse(source)
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("sketchsyn"):
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                exists = (ROOT.parent / candidate.replace(".", "/")).with_suffix(".py").exists()
                is_pkg = (ROOT.parent / candidate.replace(".", "/") / "__init__.py").exists()
                found.add(candidate if exists or is_pkg else target)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("sketchsyn")}
    return found


def _layer(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_only_from_lower_layers(path: pathlib.Path) -> None:
    mine = (
        _layer(_dotted(path)) if path.name != "__init__.py" or path.parent != ROOT else "__init__"
    )
    assert mine in RANK, f"{path} is in no layer: add its package to LAYERS"
    for target in _imports(path, module_level_only=False):
        theirs = _layer(target)
        if theirs == "sketchsyn":
            continue
        assert RANK.get(theirs, 99) <= RANK[mine], (
            f"{_dotted(path)} (layer {mine}) imports {target} (layer {theirs}), a higher layer"
        )


def _synth_rank(dotted: str) -> int | None:
    """-1 for a shared module of synth/, the family's place for a family's module, None for the
    package's own ``__init__`` and for modules outside synth/."""
    parts = dotted.split(".")
    if parts[:2] != ["sketchsyn", "synth"] or len(parts) < 3:
        return None
    if parts[2] in SYNTH_SHARED:
        return -1
    assert parts[2] in SYNTH_FAMILIES, f"{dotted} is in no synth family: add it to SYNTH_FAMILIES"
    return SYNTH_FAMILIES.index(parts[2])


@pytest.mark.parametrize(
    "path",
    [p for p in _modules() if _synth_rank(_dotted(p)) is not None],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_synth_families_import_only_families_below(path: pathlib.Path) -> None:
    mine = _synth_rank(_dotted(path))
    for target in _imports(path, module_level_only=False):
        theirs = _synth_rank(target)
        if theirs is None or mine is None:
            continue
        assert theirs <= mine, (
            f"{_dotted(path)} imports {target}, a synth family above it (order: shared, "
            f"{', '.join(SYNTH_FAMILIES)})"
        )


@pytest.mark.parametrize("module_level_only", [True, False], ids=["module-level", "lazy-too"])
def test_no_import_cycle(module_level_only: bool) -> None:
    """No cycle of modules, at module level nor through imports inside functions (a lazy import
    that closes a cycle hides a layering mistake)."""
    graph = {_dotted(p): _imports(p, module_level_only) for p in _modules()}
    known = set(graph)
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in known or nxt.count(".") == 0:
                continue
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt] if nxt in stack else [node, nxt]
                # a package's __init__ importing its own modules is not a cycle of modules
                if not any(n == nxt.rpartition(".")[0] for n in cycle):
                    raise AssertionError("import cycle: " + " -> ".join(cycle))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_stay_small(path: pathlib.Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines: split it by job"


def test_the_checker_sees_a_bad_import() -> None:
    """The layer check is not vacuous: relative and lazy imports of a higher layer are found."""
    found = _imports(ROOT / "privacy" / "noise.py", module_level_only=False)
    assert any(_layer(t) == "errors" for t in found)  # it does see real imports
    lazy = "def f():\n    from ..synth.privhp import PrivHP\n"
    found = _imports_of(lazy, "sketchsyn.privacy", module_level_only=False)
    assert {_layer(t) for t in found} == {"synth"}
    assert RANK["synth"] > RANK["privacy"]


def test_the_checker_sees_a_family_above() -> None:
    """The family check is not vacuous: offline importing privhp, or the shared tree importing a
    family, is above its rank."""
    lazy = "def f():\n    from ..privhp.summary import PrivHP\n"
    found = _imports_of(lazy, "sketchsyn.synth.offline", module_level_only=False)
    assert {_synth_rank(t) for t in found} == {SYNTH_FAMILIES.index("privhp")}
    assert _synth_rank("sketchsyn.synth.offline.pmm") < SYNTH_FAMILIES.index("privhp")
    assert _synth_rank("sketchsyn.synth.tree") < _synth_rank("sketchsyn.synth.offline.pmm")
