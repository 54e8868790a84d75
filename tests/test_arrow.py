"""numpy <-> Arrow through buffers (dse/arrow.py) gives what pyarrow's own conversions give, and a table
written by dse.tables reads back cell for cell: numbers (NaN stored as null), integers, bools, text with
blanks, constant columns, offset slices and files of several row groups."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dse.arrow import numbers_from_arrow, numbers_to_arrow, texts_from_arrow, texts_to_arrow
from dse.tables import read_columns, write_table


def test_numbers_from_arrow_is_to_numpy():
    """Every fixed-width type, with and without nulls, and a slice that starts mid-bitmap (offset 3)."""
    for values, kind in [([1.5, None, -2.0, 7.0, None, 3.0], pa.float64()), ([1.0, 2.0, None, 4.0, 5.0, 6.0], pa.float32()),
                         ([1, None, 3, 4, 5, 6], pa.int64()), ([1, 2, 3, 4, 5, 6], pa.int32()),
                         ([0, 255, 7, 8, 9, 1], pa.uint8())]:
        for array in (pa.array(values, type=kind), pa.array(values, type=kind).slice(3)):
            got = numbers_from_arrow(array)
            want = array.to_numpy(zero_copy_only=False)
            if array.null_count and want.dtype.kind != "f":
                want = want.astype(np.float64)
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype


def test_texts_round_trip():
    texts = ["h100-sxm", "", "llama3-70b", "µ-arch", "gpt3-175b"]
    array = texts_to_arrow(texts)
    assert array.equals(pa.array(texts, type=pa.string()))
    assert list(texts_from_arrow(array)) == texts
    assert list(texts_from_arrow(array.slice(2))) == texts[2:]
    blanks = texts_from_arrow(pa.array(["a", None, "b"]))
    assert blanks[0] == "a" and blanks[2] == "b" and np.isnan(blanks[1])


def test_numbers_to_arrow_is_pa_array():
    x = np.array([1.0, np.nan, 3.0, 4.0, np.nan, 6.0, 7.0, 8.0, 9.0])
    assert numbers_to_arrow(x, np.isnan(x)).equals(pa.array(x, mask=np.isnan(x)))
    flags = np.array([True, False, True, True, False, False, True, False, True, True])
    assert numbers_to_arrow(flags).equals(pa.array(flags))
    ints = np.arange(5, dtype=np.int32)
    assert numbers_to_arrow(ints).equals(pa.array(ints))


def test_table_round_trip(tmp_path):
    """write_table then read_columns (and pyarrow's reader) give back every cell; a file of three row
    groups reads as one column."""
    n = 1000
    rng = np.random.default_rng(0)
    x = rng.random(n)
    x[::7] = np.nan
    cols = {
        "x": x, "low": np.array([0.5, 2.0, np.nan])[rng.integers(0, 3, n)], "k": rng.integers(0, 9, n),
        "ok": rng.random(n) < 0.3, "one": np.broadcast_to(4.0, (n,)), "blank": np.broadcast_to(np.nan, (n,)),
        "gpu": np.array(["h100-sxm", "b200", "mi300x"], dtype=object)[rng.integers(0, 3, n)],
        "note": np.array(["a", np.nan, "b"], dtype=object)[rng.integers(0, 3, n)],
    }
    path = tmp_path / "t.parquet"
    write_table(cols, path)
    back = read_columns(path)
    frame = pq.read_table(path).to_pandas()
    def text(v):
        return [t if isinstance(t, str) else None for t in v]

    for name, want in cols.items():
        if want.dtype == object:
            assert text(back[name]) == text(want) == text(frame[name]), name
            continue
        np.testing.assert_array_equal(back[name].astype(want.dtype), want, err_msg=name)
        np.testing.assert_array_equal(frame[name].to_numpy(), want, err_msg=name)
    several = tmp_path / "groups.parquet"
    pq.write_table(pa.table({"x": x, "gpu": cols["gpu"].astype(str)}), several, row_group_size=400)
    assert pq.ParquetFile(several).metadata.num_row_groups == 3
    back = read_columns(several)
    np.testing.assert_array_equal(back["x"], x)
    assert list(back["gpu"]) == list(cols["gpu"])
