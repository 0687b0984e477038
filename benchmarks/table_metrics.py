"""Scores of a synthetic table against the real one, on a schema's public bins.

A schema here is the dict form of ``sketchsyn.Schema`` (``{"columns": [{"name", "kind", ...}]}``):
the metrics read only its public bounds and category lists, never the data's range.

Bins per column (:func:`codes`):

* ``categorical``: one bin per category, plus one for ``"other"`` (or the column's
  ``other_label``) when the policy is ``"other"``; a value outside the list falls in that bin
  (policy ``"other"``) or is refused (any other policy);
* ``integer``: one bin per value ``low … high`` when there are at most 16 values, otherwise
  16 equal bins over ``[low, high + 1)`` (month: 12 bins of one value; hour 0…23: 16 bins of
  1.5 hours);
* ``numeric``: 16 equal bins over ``[low, high]`` (``high`` in the last bin);
* ``boolean``: two bins.

Values outside the bounds of an integer or numeric column are clipped into the first or last
bin (datetime and ipv4 columns: 16 equal bins of their range).

The definitions are :mod:`sketchsyn.evaluate.tables` (what ``sketchsyn evaluate --schema``
prints); this module names them for the benchmark scripts.

Scores:

* :func:`marginal_tvd`: the total variation distance ``½ Σ |p − q|`` of the k-way marginal
  histograms, for every set of k columns;
* :func:`w1`: the exact 1-D Wasserstein-1 distance of one numeric column, in the column's
  units (the area between the two empirical CDFs).

>>> import pandas as pd
>>> schema = {"columns": [
...     {"name": "c", "kind": "categorical", "categories": ["a", "b"], "policy": "other"},
...     {"name": "x", "kind": "numeric", "low": 0.0, "high": 16.0}]}
>>> real = pd.DataFrame({"c": ["a", "b", "a", "z"], "x": [0.5, 1.5, 2.5, 16.0]})
>>> fake = pd.DataFrame({"c": ["a", "b", "b", "other"], "x": [0.5, 0.5, 2.5, 15.5]})
>>> scores = table_scores(real, fake, schema)
>>> scores["tvd1"], scores["tvd2"], scores["w1"]
({'c': 0.25, 'x': 0.25}, {('c', 'x'): 0.5}, {'x': 0.375})
"""

from __future__ import annotations

from sketchsyn.evaluate.tables import BINS, codes, marginal_tvd, table_scores, w1

__all__ = ["BINS", "codes", "marginal_tvd", "table_scores", "w1"]
