"""Writing a Parquet file atomically: a hidden temporary file beside it, fsynced, then renamed over it.

A reader never sees a half-written file (POSIX rename is atomic within a file system), and a crash leaves
at most the hidden temporary, which no reader picks up. Arrow's own copy of the schema (``ARROW:schema``,
the key-value metadata again, base64-encoded) is not stored: the callers write only plain Parquet types,
which read back as written, and their ``dse.*`` metadata goes in the footer's key-value metadata once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["write_atomic", "write_atomic_row_groups", "fsync_dir"]


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (best effort: some file systems refuse a directory fsync)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, table, metadata: Mapping[str, str] | None = None, sync_dir: bool = False,
                 **options) -> None:
    """Write the pyarrow ``table`` to ``path`` atomically; ``options`` go to ``pyarrow.parquet.ParquetWriter``
    (``use_dictionary``, ``compression``, ...); ``sync_dir``: also make the rename durable."""
    write_atomic_row_groups(path, table.schema, (table,), metadata, sync_dir, **options)


def write_atomic_row_groups(path: Path, schema, tables: Iterable, metadata: Mapping[str, str] | None = None,
                            sync_dir: bool = False, **options) -> None:
    """Write each pyarrow table of ``tables`` (all of ``schema``) as the next row group of ``path``, atomically:
    the file appears, complete, only after the last; an exception while ``tables`` is consumed leaves no file.
    ``options`` as for :func:`write_atomic`."""
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            with pq.ParquetWriter(f, schema, store_schema=False, **options) as writer:
                for table in tables:
                    writer.write_table(table)  # a row group each (or several, past 1Mi rows)
                if metadata:
                    writer.add_key_value_metadata(dict(metadata))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    if sync_dir:
        fsync_dir(path.parent)
