"""A run's directory on disk: ``run.json``, the Parquet parts of its batches and the Pareto front.

Layout (docs/architecture.md has the whole of it, with the Optuna journal beside them)::

    results/<run>/run.json                  spec as given and resolved, versions, seed, git commit, status, timings
    results/<run>/study.journal             the Optuna journal (:mod:`dse.study.journal`)
    results/<run>/trials/part-00000.parquet every evaluated design of batch 0, and so on
    results/<run>/trials/_manifest.json     the run's space hash and seed, each committed part's sha256, size, rows
    results/<run>/pareto.parquet            the non-dominated feasible designs

Every file is written atomically: to a hidden temporary file in the same folder, flushed and fsynced,
then renamed over the target (``os.replace``), so a reader or a crash never sees half a file. A part, then
its entry in the manifest, is the commit point of its batch (:mod:`dse.store.parts`: what resume and the
report check; a run from before the manifest has none and is read unchecked); the part's schema metadata
also carries the batch's Optuna record, from which :meth:`dse.study.Searcher.restore` rebuilds the study
on resume.

When each method is called: :meth:`RunStore.create` / :meth:`RunStore.open` once per run,
:meth:`RunStore.write_part` once per batch (on the sweep's writer, :func:`dse.sweep.writer.write_batch`),
:meth:`RunStore.write_run` at the start, after every batch and at the end, :meth:`RunStore.write_pareto`
at the end.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dse.errors import UserError
from dse.parquet import fsync_dir, write_atomic
from dse.store.parts import Manifest, check_journal, check_parts, report_notes, settle

__all__ = ["RunStore", "atomic_write_bytes", "to_arrow", "read_metadata", "RawJSON", "META_PREFIX"]

META_PREFIX = "dse."
PART_GLOB = "part-*.parquet"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _column(values: Any) -> pa.Array:
    arr = np.asarray(values)
    if arr.dtype.kind == "O":
        return pa.array(arr.tolist(), from_pandas=True)
    if arr.dtype.kind in "US":
        return pa.array(arr.astype(str).tolist(), type=pa.string())
    return pa.array(np.ascontiguousarray(arr))


class RawJSON(str):
    """A metadata value already encoded as JSON (:func:`to_arrow` stores it as it is)."""


def to_arrow(columns: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> pa.Table:
    """A design table (column -> 1-D array; scalars broadcast) as an Arrow table with ``dse.*`` schema
    metadata, every value stored as JSON (text too: ``"nsga2"``; a :class:`RawJSON` value as given), so a
    reader decodes them one way.
    """
    n = max((len(v) for v in columns.values() if np.ndim(v) > 0), default=1)
    table = pa.table({k: _column(v if np.ndim(v) > 0 else np.broadcast_to(np.asarray(v), (n,))) for k, v in columns.items()})
    if metadata:
        meta = {
            f"{META_PREFIX}{k}".encode(): (v if isinstance(v, RawJSON) else json.dumps(v, default=str)).encode()
            for k, v in metadata.items()
        }
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
    return table


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The ``dse.*`` schema metadata of a Parquet file, decoded from JSON (prefix stripped)."""
    meta = pq.read_schema(path).metadata or {}
    out: dict[str, Any] = {}
    for k, v in meta.items():
        key = k.decode()
        if not key.startswith(META_PREFIX):
            continue
        text = v.decode()
        try:
            out[key[len(META_PREFIX):]] = json.loads(text)
        except ValueError:
            out[key[len(META_PREFIX):]] = text
    return out



class RunStore:
    """The files of one run (see the module doc)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # -- paths ---------------------------------------------------------------------------------------

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def journal(self) -> Path:
        return self.root / "study.journal"

    @property
    def trials_dir(self) -> Path:
        return self.root / "trials"

    @property
    def pareto(self) -> Path:
        return self.root / "pareto.parquet"

    def part_path(self, index: int) -> Path:
        return self.trials_dir / f"part-{index:05d}.parquet"

    # -- creating and opening ------------------------------------------------------------------------

    @classmethod
    def create(cls, root: str | Path | None = None, results: str | Path = "results", name: str = "run") -> RunStore:
        """A new, empty run directory: ``root`` if given (it must not hold a run), else
        ``<results>/<name>-<YYYYmmdd-HHMMSS>`` (with a suffix if taken)."""
        if root is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            base = Path(results) / f"{name}-{stamp}"
            root, k = base, 1
            while root.exists():
                k += 1
                root = base.with_name(f"{base.name}-{k}")
        root = Path(root)
        try:
            taken = (root / "run.json").exists() or (root / "trials").exists()
            if not taken:
                (root / "trials").mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file in the way, read-only, too long a name, a loop, a full disk
            raise UserError(f"cannot create the run directory: {exc.strerror or exc}", where=str(root)) from None
        if taken:
            raise UserError("already holds a run; resume it with --resume or choose another --out", where=str(root))
        return cls(root)

    @classmethod
    def open(cls, root: str | Path) -> RunStore:
        """An existing run directory (``--resume``); a UserError if it is not one."""
        store = cls(root)
        try:
            found = store.run_json.is_file()
        except OSError as exc:  # too long a name, a loop
            raise UserError(f"cannot open the run directory: {exc.strerror or exc}", where=str(root)) from None
        if not found:
            raise UserError("is not a run directory (no run.json)", where=str(root))
        return store

    # -- run.json ------------------------------------------------------------------------------------

    def read_run(self) -> dict[str, Any]:
        """run.json, decoded; a UserError if it cannot be read."""
        try:
            info = json.loads(self.run_json.read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read run.json: {str(exc)[:200]}", where=str(self.root)) from None
        if not isinstance(info, dict) or not isinstance(info.get("spec"), dict):
            raise UserError("run.json is not a run's record (an object with its 'spec'): not a run directory dse wrote",
                            where=str(self.root))
        return info

    def write_run(self, info: Mapping[str, Any]) -> None:
        """Replace run.json atomically."""
        atomic_write_bytes(self.run_json, (json.dumps(info, indent=2, default=str) + "\n").encode())

    # -- parts ---------------------------------------------------------------------------------------

    def write_part(self, index: int, columns: Mapping[str, Any], metadata: Mapping[str, Any]) -> Path:
        """Write one batch's designs as ``trials/part-<index>.parquet``, atomically, then its entry in the
        run's manifest (where the run has one, :mod:`dse.store.parts`): the batch's commit."""
        path = self.part_path(index)
        table = to_arrow(columns, metadata)
        self._write_parquet(path, table)
        manifest = Manifest.read(self.trials_dir)
        if manifest is not None:
            manifest.record(path, table.num_rows)
        return path

    def parts(self) -> list[Path]:
        """Committed parts in batch order (temporary files of an interrupted write are ignored)."""
        return sorted(self.trials_dir.glob(PART_GLOB))

    def torn_parts(self) -> list[Path]:
        """Parts that are not whole Parquet files (no footer, unreadable schema): what a crash on a file
        system without atomic rename, or a truncated copy, leaves. Never read as data (called on resume)."""
        bad = []
        for p in self.parts():
            try:
                pq.read_metadata(p)  # a torn file has no footer: ArrowInvalid / OSError
                pq.read_schema(p)
            except Exception:
                bad.append(p)
        return bad

    def set_aside(self, parts: Sequence[Path], suffix: str = "torn") -> list[Path]:
        """Rename parts to hidden ``.part-NNNNN.parquet.<suffix>`` files (``torn``, ``corrupt``, ...), which
        no reader picks up (their batches run again on resume); returns the new paths."""
        out = []
        for p in parts:
            dest = p.with_name(f".{p.name}.{suffix}")
            os.replace(p, dest)
            out.append(dest)
        fsync_dir(self.trials_dir)
        return out

    def settle_parts(self, space_hash: str | None, seed: int | None) -> list[str]:
        """Before a run's batches run (new or resumed): check ``study.journal`` (a damaged one is a
        UserError) and the parts against the manifest (:mod:`dse.store.parts`: a part of another run is a
        UserError; the first part not as recorded is set aside with every part after it, their batches to
        run again). A new run starts its manifest here; a run without one (older) is left as it was.
        Returns the warning lines to print."""
        check_journal(self.journal)
        manifest = Manifest.read(self.trials_dir)
        if manifest is None:
            if not self.parts():
                Manifest.start(self.trials_dir, space_hash, seed)
            return []
        return settle(check_parts(self.root, manifest, space_hash, seed), self.part_path, self.set_aside)

    def committed_parts(self, space_hash: str | None, seed: int | None) -> tuple[list[Path] | None, list[str]]:
        """The whole committed parts for a reader (``dse report``) and one line for each kind of part it
        cannot show (missing, damaged); a part of another run is a UserError. ``(None, [])`` for a run
        without a manifest: read its folder as before."""
        manifest = Manifest.read(self.trials_dir)
        if manifest is None:
            return None, []
        check = check_parts(self.root, manifest, space_hash, seed)
        return check.good, report_notes(check)

    def read_trials(self, columns: list[str] | None = None) -> pd.DataFrame:
        """Every evaluated design of the run, in trial order."""
        parts = self.parts()
        if not parts:
            return pd.DataFrame()
        frame = pq.read_table(self.trials_dir, columns=columns).to_pandas()
        if "trial" in frame:
            frame = frame.sort_values("trial", kind="stable").reset_index(drop=True)
        return frame

    # -- the front -----------------------------------------------------------------------------------

    def write_pareto(self, frame: pd.DataFrame, metadata: Mapping[str, Any]) -> Path:
        """Write ``pareto.parquet`` atomically."""
        columns = {k: frame[k].to_numpy() for k in frame.columns}
        self._write_parquet(self.pareto, to_arrow(columns, metadata))
        return self.pareto

    # -- helpers -------------------------------------------------------------------------------------

    @staticmethod
    def _write_parquet(path: Path, table: pa.Table) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # dictionary-encode the labels (gpu, network, ...), not the numbers: a batch's floats are mostly
        # distinct, so their dictionaries cost time and save nothing (snappy still compresses the constant
        # ones; docs/performance.md)
        labels = [f.name for f in table.schema if not (pa.types.is_floating(f.type) or pa.types.is_integer(f.type))]
        # the dse.* metadata goes in the footer's key-value metadata once, without Arrow's copy of the
        # schema (dse.parquet)
        metadata = table.schema.metadata or {}
        write_atomic(path, table.replace_schema_metadata(None), metadata, sync_dir=True, use_dictionary=labels)
