"""numpy <-> Arrow through the arrays' buffers.

pyarrow's own conversions (``pa.array``, ``Array.to_numpy``) import pandas on first use, to check
whether they were handed a DataFrame; that import costs `dse evaluate` more CPU than reading its table.
Columns of numbers and of text go through their buffers instead (Arrow columnar format: a validity
bitmap, least significant bit first, then the values, or int32 offsets and UTF-8 bytes for text).
"""

from __future__ import annotations

import numpy as np

__all__ = ["numbers_from_arrow", "texts_from_arrow", "numbers_to_arrow", "texts_to_arrow", "numpy_dtype"]


def numpy_dtype(kind):
    """The numpy dtype of a fixed-width Arrow integer or floating type (None for any other)."""
    import pyarrow as pa

    if pa.types.is_signed_integer(kind):
        return np.dtype(f"i{kind.bit_width // 8}")
    if pa.types.is_unsigned_integer(kind):
        return np.dtype(f"u{kind.bit_width // 8}")
    if pa.types.is_floating(kind):
        return np.dtype(f"f{kind.bit_width // 8}")
    return None


def _valid(array) -> np.ndarray | None:
    """Validity of each cell of an Arrow array (None where it has no blank)."""
    if not array.null_count:
        return None
    bits = np.frombuffer(array.buffers()[0], dtype=np.uint8)
    return np.unpackbits(bits, bitorder="little")[array.offset:array.offset + len(array)].astype(bool)


def numbers_from_arrow(array) -> np.ndarray:
    """A fixed-width integer or floating Arrow array as numpy: its values buffer, zero-copy (read-only)
    where it has no blank; with blanks, float64 with NaN in them."""
    dtype = numpy_dtype(array.type)
    if not len(array):
        return np.empty(0, dtype=dtype)
    values = np.frombuffer(array.buffers()[1], dtype=dtype)[array.offset:array.offset + len(array)]
    valid = _valid(array)
    if valid is None:
        return values
    return np.where(valid, values, np.nan)


def texts_from_arrow(array) -> np.ndarray:
    """A (short) string Arrow array as an object array of Python str, NaN where blank."""
    import pyarrow as pa

    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64 if pa.types.is_large_string(array.type) else np.int32)
    offsets = offsets[array.offset:array.offset + len(array) + 1].tolist()
    data = array.buffers()[2]
    data = b"" if data is None else data.to_pybytes()
    out = np.empty(len(array), dtype=object)
    out[:] = [data[lo:hi].decode() for lo, hi in zip(offsets[:-1], offsets[1:])]  # one per distinct label
    valid = _valid(array)
    if valid is not None:
        out[~valid] = np.nan
    return out


def numbers_to_arrow(values: np.ndarray, blank: np.ndarray | None = None):
    """A contiguous numpy column of numbers (or bools) as an Arrow array over its buffer (zero-copy but
    for bools, which Arrow packs in bits); ``blank``: cells stored as null."""
    import pyarrow as pa

    n = len(values)
    validity = None if blank is None else pa.py_buffer(np.packbits(~blank, bitorder="little"))
    if values.dtype.kind == "b":
        return pa.Array.from_buffers(pa.bool_(), n, [validity, pa.py_buffer(np.packbits(values, bitorder="little"))])
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), n, [validity, pa.py_buffer(values)])


def texts_to_arrow(texts) -> object:
    """A sequence of str as an Arrow string array (built from UTF-8 bytes and int32 offsets)."""
    import pyarrow as pa

    try:
        encoded = [t.encode() for t in texts]
    except UnicodeEncodeError:  # a lone surrogate: as pyarrow converts (or refuses) it
        return pa.array(list(texts), type=pa.string())
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    data = pa.py_buffer(b"".join(encoded))
    return pa.Array.from_buffers(pa.string(), len(encoded), [None, pa.py_buffer(offsets), data])
