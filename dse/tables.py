"""Reading and writing design tables (CSV or Parquet) for the command line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dse.errors import UserError

__all__ = ["read_table", "write_table", "to_columns", "describe_input_error"]


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV or Parquet design table; a missing or unreadable file is a UserError naming it."""
    p = Path(path)
    if not p.is_file():
        raise UserError("no such file", where=str(p))
    try:
        if p.suffix.lower() in (".parquet", ".pq"):
            return pd.read_parquet(p)
        return pd.read_csv(p, comment="#", skipinitialspace=True)
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot read as {'Parquet' if p.suffix.lower() in ('.parquet', '.pq') else 'CSV'}: {first}", where=str(p)) from None


def to_columns(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """DataFrame -> design-table columns (numpy arrays; text stays object)."""
    return {str(name): frame[name].to_numpy() for name in frame.columns}


def write_table(columns: dict[str, np.ndarray], path: str | Path, metadata: dict[str, str] | None = None) -> None:
    """Write columns to Parquet (or CSV by suffix), atomically: temporary file, then rename."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from dse.store import atomic_write_bytes

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame({k: np.asarray(v) for k, v in columns.items()})
    if p.suffix.lower() == ".csv":
        data = frame.to_csv(index=False).encode()
    else:
        table = pa.Table.from_pandas(frame, preserve_index=False)
        if metadata:
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), **{k.encode(): v.encode() for k, v in metadata.items()}})
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        data = buffer.getvalue()
    atomic_write_bytes(p, data)


def describe_input_error(exc, path: str | Path) -> UserError:
    """An objectives.InputError as a one-line UserError: file, data row (1-based) and column."""
    parts = [str(path)]
    if exc.row is not None:
        parts.append(f"row {exc.row + 1}")
    if exc.column is not None:
        parts.append(f"column '{exc.column}'")
    return UserError(exc.detail, where=", ".join(parts))
