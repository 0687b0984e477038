"""Collection rules: modules whose doctests need an extra that is missing, and the user paths
``sketchsyn/dask.py`` and ``sketchsyn/spark.py`` (each is the module of ``sketchsyn/distributed/``
under a short name: its doctests run there, once)."""

import importlib.util

collect_ignore = ["sketchsyn/dask.py", "sketchsyn/spark.py"]
if importlib.util.find_spec("dask") is None or importlib.util.find_spec("distributed") is None:
    collect_ignore.append("sketchsyn/distributed/dask.py")
