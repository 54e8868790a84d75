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
:meth:`RunStore.write_part` once per batch (through :func:`write_part`, on the pool's writer), :meth:`RunStore.write_run` at the start, after every batch
and at the end, :meth:`RunStore.write_pareto` at the end.
"""

from __future__ import annotations

import functools
import json
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from optuna.distributions import BaseDistribution, CategoricalDistribution, distribution_to_json
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.storages.journal._file import get_lock_file
from optuna.storages.journal._storage import JournalOperation
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from dse.errors import UserError

__all__ = ["RunStore", "JournalMirror", "atomic_write_bytes", "to_arrow", "read_metadata", "write_part", "META_PREFIX",
           "STUDY_NAME"]

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


def _fsync_dir(path: Path) -> None:
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


def _column(values: Any) -> pa.Array:
    arr = np.asarray(values)
    if arr.dtype.kind == "O":
        return pa.array(arr.tolist(), from_pandas=True)
    if arr.dtype.kind in "US":
        return pa.array(arr.astype(str).tolist(), type=pa.string())
    return pa.array(np.ascontiguousarray(arr))


def to_arrow(columns: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> pa.Table:
    """A design table (column -> 1-D array; scalars broadcast) as an Arrow table with ``dse.*`` schema
    metadata, every value stored as JSON (text too: ``"nsga2"``), so a reader decodes them one way.
    """
    n = max((len(v) for v in columns.values() if np.ndim(v) > 0), default=1)
    table = pa.table({k: _column(v if np.ndim(v) > 0 else np.broadcast_to(np.asarray(v), (n,))) for k, v in columns.items()})
    if metadata:
        meta = {
            f"{META_PREFIX}{k}".encode(): json.dumps(v, default=str).encode()
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


def write_part(root: str, index: int, packed: tuple, metadata: Mapping[str, Any]) -> float:
    """Write one batch's part in the run at ``root`` (:meth:`RunStore.write_part`), its columns as
    :func:`dse.cluster.pack` packed them (one block for the floats, cheap to send to the pool's writer);
    returns the seconds it took. Called once per batch, on the pool's writer (:meth:`dse.cluster.Pool.background`)."""
    from dse.cluster import unpack

    t = time.perf_counter()
    RunStore(root).write_part(index, unpack(packed), metadata)
    return time.perf_counter() - t


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
        _fsync_dir(self.trials_dir)
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
        tmp = path.with_name(f".{path.name}.tmp")
        # dictionary-encode the labels (gpu, network, ...), not the numbers: a batch's floats are mostly
        # distinct, and building their dictionaries took half of a part's write time (snappy still
        # compresses the constant ones)
        labels = [f.name for f in table.schema if not (pa.types.is_floating(f.type) or pa.types.is_integer(f.type))]
        with open(tmp, "wb") as f:
            pq.write_table(table, f, use_dictionary=labels)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)


# ----------------------------------------------------------------------------------------------------
# the Optuna journal


class _AppendOnlyBackend(JournalFileBackend):
    """A journal file that, once :meth:`seal` ed, buffers appends (records, or lines already encoded)
    and writes them with one write and one fsync per :meth:`flush` under the file's lock, as
    ``JournalFileBackend.append_logs`` does; it then reads nothing new, so the writing ``JournalStorage``
    does not replay its own records (the engine never reads through it; :meth:`JournalMirror.load` opens
    the file afresh). Before sealing it is a plain ``JournalFileBackend`` (opening, creating the study).
    """

    def __init__(self, path: str):
        super().__init__(path)
        self._pending: list[str] = []
        self._sealed = False

    def read_logs(self, log_number_from: int):
        return [] if self._sealed else super().read_logs(log_number_from)

    def append_logs(self, logs):
        if self._sealed:
            self._pending.extend(json.dumps(log, separators=(",", ":")) for log in logs)
        else:
            super().append_logs(logs)

    def append_lines(self, lines: list[str]) -> None:
        """Records already encoded as JSON, one per line (called once per batch)."""
        self._pending.extend(lines)

    def seal(self) -> None:
        self._sealed = True

    def flush(self) -> None:
        if not self._pending:
            return
        data = ("\n".join(self._pending) + "\n").encode("utf-8")
        self._pending = []
        with get_lock_file(self._lock):
            with open(self._file_path, "ab") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())


class JournalMirror:
    """The run's Optuna journal (``study.journal``): a ``JournalStorage`` file, one append per batch.

    The file opens with ``optuna.load_study(study_name="dse", storage=JournalStorage(JournalFileBackend(
    path)))`` for any Optuna tool (dashboard, plots). It is written from the engine's live study after each
    committed batch and rewritten from the Parquet parts if a crash left it behind them.
    """

    def __init__(self, path: str | Path, directions: Sequence[StudyDirection]):
        self.path = Path(path)
        self._directions = list(directions)
        self._backend: _AppendOnlyBackend | None = None
        self._storage: JournalStorage | None = None
        self._study_id: int | None = None
        self._worker_id = f"dse-{uuid.uuid4()}-0"
        self._dists: dict[str, BaseDistribution] | None = None
        self._dists_json = ""

    def _open(self) -> None:
        if self._storage is not None:
            return
        self._backend = _AppendOnlyBackend(str(self.path))
        self._storage = JournalStorage(self._backend)
        try:
            self._study_id = self._storage.get_study_id_from_name(STUDY_NAME)
        except KeyError:
            self._study_id = self._storage.create_new_study(self._directions, STUDY_NAME)
        self._backend.seal()

    def append(self, trials: Sequence[FrozenTrial], study_attrs: Mapping[str, Any] | None = None) -> None:
        """Append finished trials and study system attributes; called once per committed batch."""
        self._open()
        for key, value in (study_attrs or {}).items():
            self._storage.set_study_system_attr(self._study_id, key, value)
        iso = functools.lru_cache(maxsize=4)(_iso)  # a batch's trials share their start and end times
        lines = self._batch_lines(trials, iso) if trials else []
        if lines is None:
            lines = [self._trial_line(t, iso) for t in trials]
        self._backend.append_lines(lines)
        self._backend.flush()

    def _batch_lines(self, trials: Sequence[FrozenTrial], iso: Callable[[datetime | None], str | None]) -> list[str] | None:
        """The CREATE_TRIAL lines of a batch as :meth:`_trial_line` writes them, with one call of the JSON
        encoder for the whole batch: for a batch of finished multi-objective trials that share their
        distributions, times and attribute names, and whose parameters (internal representation) and
        system attributes are plain numbers -- what NSGA-II batches are. None otherwise (then each trial
        is encoded on its own). The batch is read column by column, never a Python loop per cell."""
        first = trials[0]
        names, keys = list(first.params), list(first.system_attrs)
        dists = first.distributions
        if first.values is None or len(first.values) < 2 or len(names) != len(dists):
            return None
        n_values = len(first.values)
        same = (all(t.distributions is dists for t in trials) and all(t.state == first.state for t in trials)
                and all(t.datetime_start == first.datetime_start for t in trials)
                and all(t.datetime_complete == first.datetime_complete for t in trials)
                and not any(t.user_attrs or t.intermediate_values for t in trials)
                and all(list(t.params) == names and list(t.system_attrs) == keys for t in trials))
        if not same:
            return None
        values = [t.values for t in trials]
        if not all(v is not None and len(v) == n_values for v in values):
            return None
        columns = [*zip(*values)]
        columns += [_internal_column(dists[k], [t.params[k] for t in trials]) for k in names]
        columns += [[t.system_attrs[k] for t in trials] for k in keys]
        if not all(set(map(type, col)) <= _NUMBERS for col in columns):
            return None
        rows = list(zip(*columns))
        self._encode_distributions(first)
        text = _ENCODER.encode(rows)  # "[[v,..,p,..,a,..],[...]]": numbers only, so "],[" separates rows
        body = text[2:-2].split("],[")

        def literal(x: str) -> str:
            return x.replace("%", "%%")

        start, complete = iso(first.datetime_start), iso(first.datetime_complete)
        fmt = literal(
            f'{{"op_code":{int(JournalOperation.CREATE_TRIAL)},"worker_id":{_ENCODER.encode(self._worker_id)},'
            f'"study_id":{self._study_id},"state":{int(first.state)},"value":null,"values":[') \
            + ",".join(["%s"] * n_values) + literal(f'],"datetime_start":{_ENCODER.encode(start)},"params":{{') \
            + ",".join(literal(_ENCODER.encode(k)) + ":%s" for k in names) + '},"user_attrs":{},"system_attrs":{' \
            + ",".join(literal(_ENCODER.encode(k)) + ":%s" for k in keys) + '},"intermediate_values":{}' \
            + (literal(f',"datetime_complete":{_ENCODER.encode(complete)}') if complete else "") \
            + literal(f',"distributions":{self._dists_json}}}')
        return [fmt % tuple(row.split(",")) for row in body]

    def _encode_distributions(self, t: FrozenTrial) -> None:
        """Keep ``_dists_json`` the JSON of ``t``'s distributions: encoded once per run, not per trial (a
        batch's trials share one dict, so the check is one identity test)."""
        if t.distributions is not self._dists and (
                self._dists is None or len(self._dists) != len(t.distributions)
                or any(self._dists.get(k) is not d for k, d in t.distributions.items())):
            self._dists = t.distributions
            self._dists_json = json.dumps({k: distribution_to_json(d) for k, d in t.distributions.items()},
                                          separators=(",", ":"))

    def _trial_line(self, t: FrozenTrial, iso: Callable[[datetime | None], str | None]) -> str:
        """The CREATE_TRIAL record ``JournalStorage.create_new_trial(template_trial=t)`` writes, encoded
        directly: the distributions (the same for every trial of a run) are encoded once, not per trial.
        Tests load the file back with Optuna and compare."""
        self._encode_distributions(t)
        multi = t.values is not None and len(t.values) > 1
        log: dict[str, Any] = {
            "op_code": JournalOperation.CREATE_TRIAL,
            "worker_id": self._worker_id,
            "study_id": self._study_id,
            "state": t.state,
            "value": None if multi else t.value,
            "values": t.values if multi else None,
            "datetime_start": iso(t.datetime_start),
            "params": {k: t.distributions[k].to_internal_repr(v) for k, v in t.params.items()},
            "user_attrs": t.user_attrs,
            "system_attrs": t.system_attrs,
            "intermediate_values": t.intermediate_values,
        }
        if t.datetime_complete:
            log["datetime_complete"] = iso(t.datetime_complete)
        body = _ENCODER.encode(log)
        return f'{body[:-1]},"distributions":{self._dists_json}}}'

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

    def rewrite(self, trials: Sequence[FrozenTrial], study_attrs: Mapping[str, Any]) -> None:
        """Replace the file with exactly these trials (resume, when the journal and the parts disagree)."""
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.unlink(missing_ok=True)
        other = JournalMirror(tmp, self._directions)
        other.append(trials, study_attrs)
        tmp.replace(self.path)
        self._storage = self._backend = self._study_id = None


#: one encoder for every line (json.dumps with separators builds a new one per call)
_ENCODER = json.JSONEncoder(separators=(",", ":"))
_NUMBERS = {int, float}


def _internal_column(dist: BaseDistribution, values: list) -> list:
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
