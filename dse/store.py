"""A run's directory on disk: ``run.json``, the Optuna journal, Parquet parts and the Pareto front.

Layout (see ``results/README.md``)::

    results/<run>/run.json                  spec as given and resolved, versions, seed, git commit, status, timings
    results/<run>/study.journal             Optuna JournalStorage (:class:`JournalMirror`)
    results/<run>/trials/part-00000.parquet every evaluated design of batch 0, and so on
    results/<run>/pareto.parquet            the non-dominated feasible designs

Every file is written atomically: to a hidden temporary file in the same folder, flushed and fsynced,
then renamed over the target (``os.replace``), so a reader or a crash never sees half a file. A part is the
commit point of its batch: a batch whose part exists is finished; its schema metadata also carries the
batch's Optuna record, from which :meth:`dse.search.Searcher.restore` rebuilds the study on resume.

When each method is called: :meth:`RunStore.create` / :meth:`RunStore.open` once per run,
:meth:`RunStore.write_part` once per batch (through :func:`write_batch`, on the pool's writer), :meth:`RunStore.write_run` at the start, after every batch
and at the end, :meth:`RunStore.write_pareto` at the end.
"""

from __future__ import annotations

import functools
import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from optuna.distributions import BaseDistribution, CategoricalDistribution, distribution_to_json
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock
from optuna.storages.journal._file import get_lock_file
from optuna.storages.journal._storage import JournalOperation
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from dse.errors import UserError
from dse.parquet import fsync_dir, write_atomic

__all__ = ["RunStore", "JournalMirror", "JournalTarget", "journal_lines", "append_journal", "atomic_write_bytes", "to_arrow",
           "read_metadata", "write_batch", "EncodedRecord", "RawJSON", "internal_column", "META_PREFIX", "STUDY_NAME"]

META_PREFIX = "dse."
PART_GLOB = "part-*.parquet"
#: the study's name inside ``study.journal``
STUDY_NAME = "dse"


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


def write_batch(root: str, index: int, packed: tuple, metadata: Mapping[str, Any],
                journal: JournalTarget | None = None) -> tuple[float, int | None]:
    """Commit one batch in the run at ``root``: its part (:meth:`RunStore.write_part`, the commit point),
    its columns as :func:`dse.cluster.pack` packed them (one block for the floats, cheap to send to the
    pool's writer), then its journal records (:meth:`JournalTarget.append`, from the Optuna record in
    ``metadata``). Returns the seconds it took and the journal's new size (None without a journal).
    Called once per batch, on the pool's writer (:meth:`dse.cluster.Pool.background`); running it again
    for the same batch gives the same files."""
    from dse.cluster import unpack

    t = time.perf_counter()
    record = EncodedRecord(metadata["optuna"])
    RunStore(root).write_part(index, unpack(packed), {**metadata, "optuna": RawJSON(record.text)})
    offset = journal.append(record) if journal is not None else None
    return time.perf_counter() - t, offset


class RunStore:
    """The files of one run (see the module doc)."""

    def __init__(self, root: str | Path):
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
    def create(cls, root: str | Path | None = None, results: str | Path = "results", name: str = "run") -> "RunStore":
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
        if (root / "run.json").exists() or (root / "trials").exists():
            raise UserError("already holds a run; resume it with --resume or choose another --out", where=str(root))
        (root / "trials").mkdir(parents=True, exist_ok=True)
        return cls(root)

    @classmethod
    def open(cls, root: str | Path) -> "RunStore":
        """An existing run directory (``--resume``); a UserError if it is not one."""
        store = cls(root)
        if not store.run_json.is_file():
            raise UserError("is not a run directory (no run.json)", where=str(root))
        return store

    # -- run.json ------------------------------------------------------------------------------------

    def read_run(self) -> dict[str, Any]:
        try:
            return json.loads(self.run_json.read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read run.json: {exc}", where=str(self.root)) from None

    def write_run(self, info: Mapping[str, Any]) -> None:
        """Replace run.json atomically."""
        atomic_write_bytes(self.run_json, (json.dumps(info, indent=2, default=str) + "\n").encode())

    # -- parts ---------------------------------------------------------------------------------------

    def write_part(self, index: int, columns: Mapping[str, Any], metadata: Mapping[str, Any]) -> Path:
        """Write one batch's designs as ``trials/part-<index>.parquet``, atomically: the batch's commit."""
        path = self.part_path(index)
        self._write_parquet(path, to_arrow(columns, metadata))
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

    def set_aside(self, parts: Sequence[Path]) -> list[Path]:
        """Rename parts to hidden ``.part-NNNNN.parquet.torn`` files, which no reader picks up (their
        batches run again on resume); returns the new paths."""
        out = []
        for p in parts:
            dest = p.with_name(f".{p.name}.torn")
            os.replace(p, dest)
            out.append(dest)
        fsync_dir(self.trials_dir)
        return out

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
        # distinct, and building their dictionaries took half of a part's write time (snappy still
        # compresses the constant ones)
        labels = [f.name for f in table.schema if not (pa.types.is_floating(f.type) or pa.types.is_integer(f.type))]
        # the dse.* metadata goes in the footer's key-value metadata once, without Arrow's copy of the
        # schema (dse.parquet; docs/performance.md has what the copy cost)
        metadata = table.schema.metadata or {}
        write_atomic(path, table.replace_schema_metadata(None), metadata, sync_dir=True, use_dictionary=labels)


# ----------------------------------------------------------------------------------------------------
# the Optuna journal


@dataclass(frozen=True)
class JournalTarget:
    """Where and how the next committed batch is appended to the run's journal: picklable, so that the
    pool's writer appends it right after the batch's part (:func:`write_batch`).

    ``offset`` is the journal's size once the batches before this one were appended. Appending truncates
    the file back to it first, so an append that runs again (the driver writing the batch itself after
    losing the writer, which may have appended part of it) leaves the batch in the journal once.
    """

    path: str
    offset: int
    worker_id: str
    study_id: int
    #: JSON of the run's distributions, the same for every trial (encoded once per run)
    distributions_json: str

    def append(self, record: Mapping[str, Any] | EncodedRecord) -> int:
        """Append one batch from its record (:meth:`dse.search.Searcher.record`); returns the new size."""
        lines = journal_lines(record, self.worker_id, self.study_id, self.distributions_json)
        return append_journal(self.path, self.offset, lines)


class EncodedRecord:
    """A batch's Optuna record (:meth:`dse.search.Searcher.record`) with each of its columns encoded to JSON
    once, by one encoder call: the batch's part stores the whole record's JSON (:attr:`text`) in its
    metadata, and the journal's lines (:func:`journal_lines`) cut the same column texts into one token
    per trial. Encoding the numbers is most of the cost of both."""

    def __init__(self, record: Mapping[str, Any]):
        self.record = record
        enc = _RECORD_ENCODER.encode
        self.values = enc(record["values"])
        self.params = {k: enc(col) for k, col in record["params"].items()}
        self.system_attrs = {k: enc(col) for k, col in (record.get("system_attrs") or {}).items()}
        rest = {k: v for k, v in record.items() if k not in ("number", "params", "values", "system_attrs")}
        self.text = ("{" + f'"number":{enc(record["number"])},"params":{_object(self.params)},"values":{self.values},'
                     f'"system_attrs":{_object(self.system_attrs)}' + "".join(f",{enc(k)}:{enc(v)}" for k, v in rest.items())
                     + "}")


def _object(texts: Mapping[str, str]) -> str:
    """A JSON object from its keys and its values' JSON texts."""
    return "{" + ",".join(f"{_ENCODER.encode(k)}:{v}" for k, v in texts.items()) + "}"


def journal_lines(record: Mapping[str, Any] | EncodedRecord, worker_id: str, study_id: int,
                  distributions_json: str) -> list[str]:
    """The journal records of one committed batch, built from its record's columns: a
    SET_STUDY_SYSTEM_ATTR line per study attribute new in the batch (NSGA-II's parents), then one
    CREATE_TRIAL line per finished trial, as ``JournalStorage.set_study_system_attr`` and
    ``JournalStorage.create_new_trial(template_trial=trial)`` write them (compact JSON, same keys).

    The numbers come from the record's column texts (:class:`EncodedRecord`), cut into one token per
    trial; only a system attribute that is not a number (or is missing for some trials) is encoded trial
    by trial.
    """
    encoded = record if isinstance(record, EncodedRecord) else EncodedRecord(record)
    record = encoded.record
    head = f'"worker_id":{_ENCODER.encode(worker_id)},"study_id":{int(study_id)}'
    lines = [f'{{"op_code":{int(JournalOperation.SET_STUDY_SYSTEM_ATTR)},{head},"system_attr":{_RECORD_ENCODER.encode({k: v})}}}'
             for k, v in (record.get("study_system_attrs") or {}).items()]
    n = len(record["number"])
    if n == 0:
        return lines
    multi = len(record["values"][0]) > 1
    value_rows = encoded.values[2:-2].split("],[")  # numbers only (Infinity included)
    if len(value_rows) != n:
        raise ValueError("every told trial of a batch has the same number of objective values")
    iso = functools.lru_cache(maxsize=16)(lambda text: _ENCODER.encode(_iso(datetime.fromisoformat(text)) if text else None))
    starts = record.get("datetime_starts") or [record.get("datetime_start")] * n
    params = {k: _tokens(record["params"][k], text) for k, text in encoded.params.items()}
    columns = [value_rows, [iso(s) for s in starts], *params.values()]
    attrs = record.get("system_attrs") or {}
    if all(len(col) == n and _numbers(col) for col in attrs.values()):  # their tokens fill placeholders too
        columns += [_split(text) for text in encoded.system_attrs.values()]
        attrs_fmt = "{" + ",".join(_literal(_ENCODER.encode(k)) + ":%s" for k in attrs) + "}"
    else:  # text, lists or missing values: each trial's attributes on their own (None: not set)
        columns.append([_RECORD_ENCODER.encode({k: col[i] for k, col in attrs.items() if col[i] is not None})
                        for i in range(n)])
        attrs_fmt = "%s"
    complete = record.get("datetime_complete")
    fmt = (_literal(f'{{"op_code":{int(JournalOperation.CREATE_TRIAL)},{head},"state":{int(TrialState.COMPLETE)},')
           + ('"value":null,"values":[%s]' if multi else '"value":%s,"values":null')
           + ',"datetime_start":%s,"params":{' + ",".join(_literal(_ENCODER.encode(k)) + ":%s" for k in params)
           + '},"user_attrs":{},"system_attrs":' + attrs_fmt + ',"intermediate_values":{}'
           + (_literal(f',"datetime_complete":{iso(complete)}') if complete else "")
           + _literal(f',"distributions":{distributions_json}}}'))
    lines += [fmt % row for row in zip(*columns)]
    return lines


def _literal(text: str) -> str:
    """``text`` inside a %-format, as itself."""
    return text.replace("%", "%%")


def _numbers(column: Sequence[Any]) -> bool:
    return set(map(type, column)) <= _NUMBERS


def _split(text: str) -> list[str]:
    """The items of a JSON list of numbers, as text: ``"[1.5,2]"`` -> ``["1.5", "2"]``."""
    return text[1:-1].split(",") if len(text) > 2 else []


def _tokens(column: Sequence[Any], text: str) -> list[str]:
    """The JSON text of each number of a column (a parameter's internal values), cut from the column's
    JSON ``text``."""
    if not _numbers(column):
        raise ValueError(f"journal columns hold numbers only, not {sorted({type(v).__name__ for v in column})}")
    return _split(text)


def append_journal(path: str | Path, offset: int, lines: Sequence[str]) -> int:
    """Append ``lines`` to the journal at ``path`` after its first ``offset`` bytes (dropping what lies
    beyond them: a batch appended again replaces its first append), with one write and one fsync under
    the file's lock, as ``JournalFileBackend.append_logs`` writes; returns the journal's new size.
    A journal shorter than ``offset`` (changed behind the run's back) is appended to at its end."""
    data = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
    with get_lock_file(JournalFileSymlinkLock(str(path))):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size > offset:
                os.ftruncate(fd, offset)
                size = offset
            os.lseek(fd, size, os.SEEK_SET)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    return size + len(data)


class JournalMirror:
    """The run's Optuna journal (``study.journal``): a ``JournalStorage`` file, one append per batch.

    The file opens with ``optuna.load_study(study_name="dse", storage=JournalStorage(JournalFileBackend(
    path)))`` for any Optuna tool (dashboard, plots). Its study is created at the start of a run
    (:meth:`target`); each committed batch is appended from its record (:meth:`JournalTarget.append`, on
    the pool's writer, after the batch's part) and the file is rewritten from the parts' records on resume
    if a crash left it behind them (:meth:`rewrite`).
    """

    def __init__(self, path: str | Path, directions: Sequence[StudyDirection],
                 distributions: Mapping[str, BaseDistribution]):
        self.path = Path(path)
        self._directions = list(directions)
        self._worker_id = f"dse-{uuid.uuid4()}-0"
        self._distributions = dict(distributions)
        self._dists_json = json.dumps({k: distribution_to_json(d) for k, d in distributions.items()},
                                      separators=(",", ":"))
        self._study_id: int | None = None
        self.offset = 0  # the file's size after the last batch appended

    def target(self) -> JournalTarget:
        """Where the next batch goes; creates the file and its study on the first call."""
        if self._study_id is None:
            storage = JournalStorage(JournalFileBackend(str(self.path)))
            try:
                self._study_id = storage.get_study_id_from_name(STUDY_NAME)
            except KeyError:
                self._study_id = storage.create_new_study(self._directions, STUDY_NAME)
            self.offset = self.path.stat().st_size
        return JournalTarget(str(self.path), self.offset, self._worker_id, self._study_id, self._dists_json)

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one committed batch here and now (the writer's work, done in this process)."""
        self.offset = self.target().append(record)

    def load(self) -> tuple[list[FrozenTrial], dict[str, Any]]:
        """Finished trials and study system attributes as stored (called on resume)."""
        if not self.path.exists():
            return [], {}
        storage = JournalStorage(JournalFileBackend(str(self.path)))
        try:
            study_id = storage.get_study_id_from_name(STUDY_NAME)
        except KeyError:
            return [], {}
        trials = storage.get_all_trials(study_id, deepcopy=False, states=(TrialState.COMPLETE,))
        return list(trials), dict(storage.get_study_system_attrs(study_id))

    def rewrite(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Replace the file with exactly the batches of these records (resume, when the journal and the
        parts disagree)."""
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.unlink(missing_ok=True)
        other = JournalMirror(tmp, self._directions, self._distributions)
        for record in records:
            other.append(record)
        other.target()  # the study, even without batches
        tmp.replace(self.path)
        self._study_id = None


#: one encoder for every line (json.dumps with separators builds a new one per call)
_ENCODER = json.JSONEncoder(separators=(",", ":"))
#: for records: what json.dumps(default=str) stores for a value JSON has no type for
_RECORD_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)
_NUMBERS = {int, float}


def internal_column(dist: BaseDistribution, values: list) -> list:
    """``dist.to_internal_repr`` of each value of one parameter: the choice's index for a categorical
    parameter, the float for a number (Optuna rejects NaN there), one column at a time."""
    if isinstance(dist, CategoricalDistribution):
        index: dict = {}
        for i, c in enumerate(dist.choices):  # the first equal choice, as choices.index finds it
            index.setdefault(c, i)
        try:
            return [index[v] for v in values]
        except (KeyError, TypeError):
            return [dist.to_internal_repr(v) for v in values]
    out = list(map(float, values))
    if any(v != v for v in out):
        return [dist.to_internal_repr(v) for v in values]  # raises as Optuna does
    return out


def _iso(dt: datetime | None) -> str | None:
    """A naive local timestamp as Optuna's journal stores it (UTC, microseconds)."""
    return dt.astimezone(timezone.utc).isoformat(timespec="microseconds") if dt else None
