"""The sweep's writer: each told batch's Parquet part, then its journal records, written beside the driver.

:func:`write_batch` commits one batch: its part (the commit point, :meth:`dse.store.RunStore.write_part`)
with the batch's Optuna record in its metadata, then the record appended to the run's Optuna journal
(:class:`dse.study.JournalTarget`). The record's columns are encoded to JSON once, for both
(:class:`dse.study.EncodedRecord`). :func:`open_writer` gives the run's writer: with Ray, a child process
of the driver (:class:`~dse.sweep.background.BackgroundProcess`) that writes while the driver asks the
next batch; without Ray, this process, at once. Either way the writer's calls run in order, and a batch
written again (the driver taking over from a lost writer) leaves the same files.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from dse.cluster import unpack
from dse.store import RawJSON, RunStore
from dse.study import EncodedRecord, JournalTarget
from dse.sweep.background import BackgroundProcess

__all__ = ["write_batch", "Writer", "InlineWriter", "open_writer"]


def write_batch(root: str, index: int, packed: tuple, metadata: Mapping[str, Any],
                journal: JournalTarget | None = None) -> tuple[float, int | None]:
    """Commit one batch in the run at ``root``: its part (its columns as :func:`dse.cluster.pack` packed
    them: one block for the floats, cheap to send to the writer), then its journal records, from the
    Optuna record in ``metadata``. Returns the seconds it took and the journal's new size (None without a
    journal). Called once per batch, on the writer; running it again for the same batch gives the same
    files."""
    t = time.perf_counter()
    record = EncodedRecord(metadata["optuna"])
    RunStore(root).write_part(index, unpack(packed), {**metadata, "optuna": RawJSON(record.text)})
    offset = journal.append(record) if journal is not None else None
    return time.perf_counter() - t, offset


class Writer(Protocol):
    """Runs the sweep's writes in the order they are handed over."""

    def call(self, fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        """Start ``fn(*args)`` and return at once; the returned function waits for (and returns) its
        result, or raises if the writer lost it (the sweep then writes the batch itself)."""
        ...

    def close(self) -> None:
        """Finish what was handed over and stop (called once, at the end of the run)."""
        ...


class InlineWriter:
    """Writes in this process, at once (a run without Ray: nothing to overlap with)."""

    def call(self, fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        result = fn(*args)
        return lambda: result

    def close(self) -> None:
        pass


def open_writer(in_process: bool) -> Writer:
    """The run's writer (called once per run, before the pool starts, so that the child process starts
    while Ray starts the actors)."""
    return InlineWriter() if in_process else BackgroundProcess()
