"""Bytes, files and streams: the versioned checksummed container and its header checks, the
`Summary` base with its registry and atomic checkpoints, batch readers, stream feeding and
progress bars.
"""

from __future__ import annotations

from .checkpoint import kind_of, load, save
from .progress import progress, wants_bar
from .readers import (
    AccessLogReader,
    ArrowReader,
    BatchReader,
    CSVReader,
    JSONLinesReader,
    ParquetReader,
    Position,
    follow,
    format_of,
    open_reader,
    pandas_chunks,
)
from .serial import CONTAINER_VERSION, MetaReader, bad_contents, check_version, pack, unpack
from .stream import consume
from .summary import STATES, Summary, add_discovery, registry

__all__ = [
    "STATES",
    "Summary",
    "add_discovery",
    "registry",
    "AccessLogReader",
    "ArrowReader",
    "BatchReader",
    "CONTAINER_VERSION",
    "CSVReader",
    "JSONLinesReader",
    "MetaReader",
    "ParquetReader",
    "Position",
    "bad_contents",
    "check_version",
    "consume",
    "follow",
    "format_of",
    "kind_of",
    "load",
    "open_reader",
    "pack",
    "pandas_chunks",
    "progress",
    "save",
    "unpack",
    "wants_bar",
]
