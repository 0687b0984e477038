"""Collection rules for optional extras: modules whose doctests need an extra that is missing."""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("dask") is None or importlib.util.find_spec("distributed") is None:
    collect_ignore.append("sketchsyn/distributed/dask.py")
