"""The distributed path: one protocol (:mod:`~sketchsyn.distributed.protocol`) and its two faces,
:mod:`sketchsyn.dask` (:mod:`~sketchsyn.distributed.dask`) and :mod:`sketchsyn.spark`
(:mod:`~sketchsyn.distributed.spark`).

Users import the faces by their short paths, ``from sketchsyn import dask`` and
``from sketchsyn import spark``; the protocol's names are re-exported here.
"""

from __future__ import annotations

from .protocol import (
    MODES,
    FileTask,
    check_call,
    check_file_call,
    check_summary,
    file_list,
    from_wire,
    is_raw,
    merge_wire,
    missing_columns,
    reads_tables,
    roomy_malloc,
    summarize_arrow_batches,
    summarize_items,
    summarize_paths,
    to_wire,
)

__all__ = [
    "MODES",
    "FileTask",
    "check_call",
    "check_file_call",
    "check_summary",
    "file_list",
    "from_wire",
    "is_raw",
    "merge_wire",
    "missing_columns",
    "reads_tables",
    "roomy_malloc",
    "summarize_arrow_batches",
    "summarize_items",
    "summarize_paths",
    "to_wire",
]
