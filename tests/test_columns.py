"""Column names on domains, DataFrames in update_many, sample(as_frame=True), names in to_bytes."""

from __future__ import annotations

import numpy as np
import pytest

from sketchsyn import PMM, BitDomain, Box, PrivateDistribution, PrivHP
from sketchsyn.domains import Domain
from sketchsyn.errors import InputError, ParameterError

pd = pytest.importorskip("pandas")


def test_columns_survive_to_dict_and_change_equality():
    box = Box([0, 0], [1, 2], columns=["lon", "lat"])
    assert box.columns == ("lon", "lat")
    assert box.to_dict()["columns"] == ["lon", "lat"]
    assert Domain.from_dict(box.to_dict()) == box
    assert box != Box([0, 0], [1, 2])
    assert "columns" not in Box([0], [1]).to_dict()  # old blobs and dicts unchanged
    ip = BitDomain.ipv4(columns=["ip"])
    assert Domain.from_dict(ip.to_dict()).columns == ("ip",)
    assert "columns=['lon', 'lat']" in repr(box)


@pytest.mark.parametrize("bad", [["a"], ["a", "a"], ["a", ""], "ab", [1, 2]])
def test_bad_column_names_are_refused(bad):
    with pytest.raises(ParameterError, match="'columns' parameter of Box"):
        Box([0, 0], [1, 1], columns=bad)


def test_update_many_takes_a_dataframe_matched_by_name():
    rng = np.random.default_rng(0)
    X = rng.random((2000, 2))
    frame = pd.DataFrame({"id": np.arange(2000), "lat": X[:, 1], "lon": X[:, 0]})
    named = Box([0, 0], [1, 1], columns=["lon", "lat"])
    a = PrivHP(named, epsilon=1.0, k=8, width=64, depth=10, rng=3, raw=True)
    b = PrivHP(Box.unit(2), epsilon=1.0, k=8, width=64, depth=10, rng=3, raw=True)
    a.update_many(frame)  # columns by name: 'id' ignored, order lon, lat
    b.update_many(X)
    assert np.array_equal(a._tree, b._tree) and np.array_equal(a._bank, b._bank)
    with pytest.raises(InputError, match="no column 'lon'"):
        a.update_many(frame.rename(columns={"lon": "x"}))
    # Without names a DataFrame must have exactly d columns, taken in order.
    b.update_many(pd.DataFrame(X, columns=["p", "q"]))
    with pytest.raises(InputError, match="shape"):
        b.update_many(frame)


def test_dataframe_for_pmm_and_bitdomain():
    pmm = PMM(Box([0, 0], [1, 1], columns=["x", "y"]), epsilon=1.0, depth=6, rng=0)
    pmm.update_many(pd.DataFrame({"y": [0.1, 0.9], "x": [0.2, 0.3]}))
    assert pmm.n_seen == 2
    dom = BitDomain.ipv4(columns=["ip"])
    codes = dom.encode(pd.DataFrame({"ip": ["10.0.0.1", "192.168.0.1"], "n": [1, 2]}), depth=8)
    assert codes.tolist() == [10, 192]


def test_sample_as_frame_uses_the_names_and_they_survive_to_bytes():
    box = Box([-74.05, 40.6], [-73.75, 40.9], columns=["lon", "lat"])
    php = PrivHP(box, epsilon=1.0, k=8, width=64, depth=10, rng=1)
    php.update_many(np.column_stack([np.full(500, -73.9), np.full(500, 40.7)]))
    blob = php.to_bytes()
    assert PrivHP.from_bytes(blob).domain.columns == ("lon", "lat")
    release = php.release()
    again = PrivateDistribution.from_bytes(release.to_bytes())
    frame = again.sample(100, rng=2, as_frame=True)
    assert list(frame.columns) == ["lon", "lat"] and frame.shape == (100, 2)
    assert ((frame["lon"] >= -74.05) & (frame["lon"] <= -73.75)).all()
    np.testing.assert_array_equal(frame.to_numpy(), again.sample(100, rng=2))
    keys = PrivateDistribution(
        BitDomain(8), [8], [5], [1.0], epsilon=1.0, mechanism="hand-made"
    ).sample(3, rng=0, as_frame=True)
    assert list(keys.columns) == ["key"] and keys["key"].tolist() == [5, 5, 5]
