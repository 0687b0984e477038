"""Build of sketchsyn's compiled kernels (Cython, in ``sketchsyn/kernels/``); everything else
about the package is in pyproject.toml.

The extension modules are optional: where they cannot be compiled (no C compiler) the install
goes on without them and sketchsyn runs its numpy path, which gives the same results
(``sketchsyn.kernels.active()`` says which path runs).
"""

from __future__ import annotations

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

MODULES = ("_words", "_noise", "_privhp", "_counters", "_partition", "_text")
# Cython's utility code (typed memoryviews and the like) compiled once, in a module of its
# own that the six import, instead of into each of them: about 40% less C to compile.
SHARED = "sketchsyn.kernels._cyutility"


class BuildExt(build_ext):
    """Optimised builds with GCC and clang (``-O3``: the hash loops are vectorised; ``-g0``:
    no debugging information, a third of the size, so a process maps less at import; the
    shared Cython runtime at ``-O1``, as fast here and quicker to compile), one compiler per
    CPU."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:  # the modules compile side by side (``-j`` still overrides)
            self.parallel = os.cpu_count() or 1

    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "unix":
            for ext in self.extensions:
                # the shared runtime code runs once a call, never in a loop: -O1 compiles faster
                level = "-O1" if ext.name == SHARED else "-O3"
                ext.extra_compile_args = [*ext.extra_compile_args, level, "-g0"]
        super().build_extensions()


def extensions() -> list[Extension]:
    if os.environ.get("SKETCHSYN_NO_EXTENSION"):  # a pure-Python build (tests of the fallback)
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:  # a build without its build requirements: the numpy path only
        print("sketchsyn: Cython is missing, the compiled kernels are not built")
        return []
    here = os.path.join("sketchsyn", "kernels")
    exts = [
        Extension(
            f"sketchsyn.kernels.{name}",
            [os.path.join(here, f"{name}.pyx")],
            include_dirs=[here],
            optional=True,
        )
        for name in MODULES
    ]
    exts.append(Extension(SHARED, [os.path.join(here, "_cyutility.c")], optional=True))
    built = cythonize(
        exts,
        compiler_directives={"language_level": 3},
        quiet=True,
        nthreads=os.cpu_count() or 1,
        shared_utility_qualified_name=SHARED,
    )
    for ext in built:  # (cythonize makes new Extensions, without the flag)
        ext.optional = True
    return built


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
