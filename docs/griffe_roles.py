"""A Griffe extension for the docs site: Sphinx roles in docstrings become cross-references.

The library's docstrings use numpy style with Sphinx roles (``:class:`~sketchsyn.PrivHP```,
``:meth:`release```), which read well in ``help()`` and in an editor. mkdocstrings renders
Markdown, where such a role would show as raw text. This extension rewrites each role into an
optional autorefs link before the docstring is rendered: a link when the target is on the site,
plain code when it is not (no broken link, no warning). A short name is looked up in the
object's class and module first, so ``:meth:`release``` inside a class links to that class's
``release``.

Used by ``mkdocs.yml`` (``extensions: [docs/griffe_roles.py:SphinxRoles]``).
"""

from __future__ import annotations

import ast
import html
import re
from typing import Any

import griffe

EXTERNAL = {"numpy", "np", "os", "dask", "pyspark", "pyarrow", "pandas", "polars", "fractions"}
ROLE = re.compile(
    r":(?:py:)?(class|meth|func|attr|mod|obj|data|exc|const):`(~?)([^`<>]+?)(?:\s*<([^`<>]+)>)?`"
)


def _candidates(obj: Any, name: str) -> list[str]:
    """Full paths that ``name`` may mean, seen from ``obj``, most specific first."""
    if name.startswith("sketchsyn"):
        return [name]
    scopes: list[Any] = []
    here = obj
    while here is not None:
        scopes.append(here)
        here = here.parent
    out = []
    for scope in scopes:
        head = name.split(".", 1)[0]
        try:
            members = scope.members
        except Exception:  # noqa: BLE001 (an alias that cannot be resolved)
            continue
        if head in members:
            member = members[head]
            base = getattr(member, "target_path", None) if member.is_alias else member.path
            rest = name.split(".", 1)[1:]
            out.append(".".join([base or f"{scope.path}.{head}", *rest]))
    if name.split(".", 1)[0] in EXTERNAL:
        out.append(name)
    out.append(f"sketchsyn.{name}")
    return out


def _link(obj: Any, match: re.Match[str]) -> str:
    _role, tilde, target, explicit = match.groups()
    if explicit:  # Sphinx's ``title <target>`` form
        shown, target = target.strip(), explicit.strip()
    else:
        target = target.strip().rstrip("()")
        shown = target.rsplit(".", 1)[-1] if tilde else target
    paths = _candidates(obj, target)
    code = f"<code>{html.escape(shown)}</code>"
    return f'<autoref identifier="{html.escape(paths[0])}" optional>{code}</autoref>'


def fence_doctests(text: str) -> str:
    """Wrap each run of ``>>>`` lines and their output in a ``pycon`` code fence.

    Outside a numpy ``Examples`` section Markdown would read ``>>>`` as nested quotes.
    """
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(">>>") and not _in_fence(out):
            indent = line[: len(line) - len(line.lstrip())]
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out += [f"{indent}```pycon", *block, f"{indent}```"]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _in_fence(lines: list[str]) -> bool:
    return sum(line.lstrip().startswith("```") for line in lines) % 2 == 1


def _read_only_text(obj: Any) -> str | None:
    """The text of ``name = ReadOnly[T]("text")`` (sketchsyn.attributes), or None."""
    value = getattr(obj, "value", None) if getattr(obj, "is_attribute", False) else None
    if not isinstance(value, griffe.ExprCall) or "ReadOnly" not in str(value.function):
        return None
    try:
        text = ast.literal_eval(str(value.arguments[0]))
    except (IndexError, ValueError, SyntaxError):
        return None
    return text if isinstance(text, str) else None


class SphinxRoles(griffe.Extension):
    """Roles become optional cross-references; doctest blocks become code blocks; a
    ``ReadOnly`` attribute shows its text as its docstring, like a property."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:  # noqa: ARG002
        text = _read_only_text(obj)
        if text is not None and obj.docstring is None:
            obj.docstring = griffe.Docstring(text, parent=obj)
            obj.labels = {"property", "read-only"}
            obj.annotation = getattr(obj.value.function, "slice", None)  # ReadOnly[T] -> T
            obj.value = None
        doc = obj.docstring
        if doc is None:
            return
        doc.value = fence_doctests(ROLE.sub(lambda m: _link(obj, m), doc.value))
