"""One sweep, end to end: space -> Optuna batches -> actors -> tell -> Parquet -> Pareto front.

:func:`run` is the engine's main loop. Per batch it asks the searcher for a batch of designs
(:mod:`dse.search`), builds one columnar design table (:mod:`dse.space`), submits it to the pool, which
scores it in chunks (:mod:`dse.cluster`; by default each design's best feasible mapping from
``objectives.search_mapping``), tells every trial its objective values and constraint violations, and
commits the batch: one Parquet part (:mod:`dse.store`), then its records appended to the Optuna journal;
then it updates the progress line. A told batch goes to the pool's writer (:meth:`dse.cluster.Pool.background`,
a process beside the driver), which writes its part and journal records while the driver asks the next
batch (asking needs only the previous batch told); the driver waits for them while the workers score that
next batch. So the writing overlaps both the sampler and the model, off the driver's GIL. At the end it
writes ``pareto.parquet`` and returns a :class:`SweepResult`.

The scoring function is injectable (``run(spec, evaluate_fn=...)``): tests drive the engine with toy
functions; any function from a design table to a result table with the objective and constraint columns
will do. It must be picklable (a module-level function or a ``functools.partial`` of one) to go to Ray.

Feasibility is data: a design whose best mapping is infeasible, or that breaks a space constraint, is told
to Optuna with its objective values and a positive constraint violation, and is stored like any other.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from dse import __version__
from dse.cluster import Pool, ScoreFn, open_pool, pack
from dse.errors import UserError
from dse.pareto import front_table, nondominated_mask, to_minimization
from dse.progress import Progress
from dse.search import Searcher, silence_optuna
from dse.space import Space
from dse.spec import Spec, Vocabulary, parse_spec
from dse.store import RunStore, read_metadata, write_batch

__all__ = ["run", "SweepResult", "ScoreCache", "preflight", "score_with_mapping_search", "default_scorer",
           "write_front", "MODEL_CONSTRAINT"]

#: the Optuna constraint that carries the model's own feasibility (max of its ``con_*`` columns)
MODEL_CONSTRAINT = "model"
_BATCH_TIMERS = ("ask", "table", "score", "tell", "record", "send", "write", "progress")
#: run.json is rewritten at most this often while batches run (and always at the start and the end)
RUN_JSON_EVERY_S = 2.0


def score_with_mapping_search(table: Mapping[str, Any], choices: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Score designs with their best feasible mapping (``objectives.search_mapping``); runs on the actors."""
    import objectives

    return objectives.search_mapping(table, choices=dict(choices) if choices else None)


def default_scorer(space: Space) -> ScoreFn:
    """The production scoring function of a space: mapping search over the space's mapping choices."""
    import objectives

    choices = space.mapping_choices(objectives.DEFAULT_CHOICES) if space.spec.mapping else None
    return functools.partial(score_with_mapping_search, choices=choices)


@dataclass
class SweepResult:
    """What a finished (or stopped) run produced."""

    run_dir: Path
    status: str
    n_trials: int
    n_admissible: int
    front: pd.DataFrame
    n_scored: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def designs_per_s(self) -> float:
        return self.n_trials / self.wall_s if self.wall_s > 0 else 0.0


def _versions() -> dict[str, str]:
    import optuna
    import pyarrow
    import ray

    out = {"dse": __version__, "python": platform.python_version(), "numpy": np.__version__,
           "pandas": pd.__version__, "pyarrow": pyarrow.__version__, "optuna": optuna.__version__,
           "ray": ray.__version__}
    try:
        import objectives

        out["objectives"] = getattr(objectives, "__version__", "unknown")
    except ImportError:
        pass
    return out


def _git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _units(columns: list[str]) -> dict[str, str]:
    try:
        import objectives

        metrics = objectives.METRICS
    except ImportError:
        return {}
    return {c: metrics[c] for c in columns if c in metrics}


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


class _Front:
    """The current front of admissible designs (objective vectors only), merged batch by batch."""

    def __init__(self, directions: list[str]):
        self.directions = directions
        self.F = np.zeros((0, len(directions)))

    def add(self, values: np.ndarray, admissible: np.ndarray) -> int:
        F = to_minimization(values[admissible], self.directions)
        F = F[np.isfinite(F).all(axis=1)]
        if len(F):
            both = np.vstack([self.F, F])
            self.F = np.unique(both[nondominated_mask(both)], axis=0)  # one entry per distinct design value
        return len(self.F)


class ScoreCache:
    """Results of every design scored in this run, keyed by its searched columns.

    The model is deterministic, so a design the sampler proposes again (frequent in discrete spaces once
    NSGA-II converges) is looked up instead of scored again, and a batch scores each distinct new design
    once. Called once per batch by :func:`run` (:meth:`submit`, one batch at a time: a batch's new designs
    are stored when its results come back); on resume it is refilled from the parts
    (:meth:`add_table`). A design's key is a 64-bit hash of its searched columns (pandas, vectorized),
    found by binary search in a sorted array and checked against the stored columns; results live in
    columns that grow by doubling. So a batch costs O(batch log n), never a pass over the whole run, and
    no Python loop over rows. Memory: the result row of every distinct design (about 8 bytes a column).
    """

    def __init__(self, key_columns: list[str]):
        self.key_columns = list(key_columns)
        self._hashes = np.zeros(0, dtype=np.uint64)  # sorted
        self._rows = np.zeros(0, dtype=np.int64)  # row of each sorted hash
        self._columns: dict[str, np.ndarray] = {}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def _keys(self, table: Mapping[str, Any], n: int) -> pd.DataFrame:
        """Numbers as float64 (1024 and 1024.0 are one design), names as text."""
        cols = {}
        for c in self.key_columns:
            a = np.broadcast_to(np.asarray(table[c]), (n,))
            cols[c] = a.astype(np.float64) if a.dtype.kind in "iufb" else a.astype(str).astype(object)
        return pd.DataFrame(cols)

    def _lookup(self, keys: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(hash of each row, stored row of each row or -1)."""
        h = pd.util.hash_pandas_object(keys, index=False).to_numpy(np.uint64)
        pos = np.full(len(h), -1, dtype=np.int64)
        if self._n:
            i = np.minimum(np.searchsorted(self._hashes, h), len(self._hashes) - 1)
            hit = self._hashes[i] == h
            rows = self._rows[i]
            for c in self.key_columns:  # a hash collision would be a wrong answer: check the key itself
                hit &= self._columns["__key__" + c][np.where(hit, rows, 0)] == keys[c].to_numpy()
            pos[hit] = rows[hit]
        return h, pos

    def _append(self, h: np.ndarray, keys: pd.DataFrame, results: Mapping[str, Any]) -> np.ndarray:
        """Store new distinct designs; returns their rows."""
        m = len(h)
        rows = np.arange(self._n, self._n + m)
        new = {"__key__" + c: keys[c].to_numpy() for c in self.key_columns}
        new.update((k, np.broadcast_to(np.asarray(v), (m,))) for k, v in results.items())
        need = self._n + m
        for k, v in new.items():
            col = self._columns.get(k)
            if col is None:
                col = self._columns[k] = np.empty(max(need, 1024), dtype=v.dtype)
            elif len(col) < need:  # grow by doubling: appends cost O(1) per design on average
                grown = np.empty(max(need, 2 * len(col)), dtype=np.result_type(col.dtype, v.dtype))
                grown[: self._n] = col[: self._n]
                col = self._columns[k] = grown
            elif col.dtype != v.dtype and np.result_type(col.dtype, v.dtype) != col.dtype:
                col = self._columns[k] = col.astype(np.result_type(col.dtype, v.dtype))
            col[self._n: need] = v
        order = np.argsort(h, kind="stable")  # sorted new hashes keep the array sorted after the insert
        at = np.searchsorted(self._hashes, h[order])
        self._hashes = np.insert(self._hashes, at, h[order])
        self._rows = np.insert(self._rows, at, rows[order])
        self._n = need
        return rows

    def add_table(self, table: Mapping[str, Any]) -> None:
        """Remember already scored rows (resume: the committed parts)."""
        n = max((len(v) for v in table.values() if np.ndim(v) > 0), default=0)
        if n == 0 or not self.key_columns:
            return
        keys = self._keys(table, n)
        h, pos = self._lookup(keys)
        _, first = np.unique(h, return_index=True)
        fresh = np.intersect1d(first, np.flatnonzero(pos < 0))
        self._append(h[fresh], keys.iloc[fresh].reset_index(drop=True),
                     {k: np.asarray(v)[fresh] for k, v in table.items() if np.ndim(v) > 0})

    def submit(self, table: Mapping[str, Any], submit: Callable[[Mapping[str, Any]], Callable[[], Mapping[str, np.ndarray]]]
               ) -> Callable[[], tuple[dict[str, np.ndarray], int]]:
        """Start scoring the distinct unknown designs of ``table`` with ``submit`` (which returns at once
        with a function that waits for their results, as :meth:`dse.cluster.Pool.submit` does); returns
        a function that waits and gives the results of every row and how many designs were scored."""
        n = max((len(v) for v in table.values() if np.ndim(v) > 0), default=1)
        if not self.key_columns:
            waiting = submit(table)
            return lambda: (dict(waiting()), n)
        keys = self._keys(table, n)
        h, pos = self._lookup(keys)
        unknown = pos < 0
        uniq, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        fresh = first[unknown[first]]  # first row of each distinct unknown design
        waiting = submit({k: (np.asarray(v)[fresh] if np.ndim(v) > 0 else v) for k, v in table.items()}) if len(fresh) else None

        def wait() -> tuple[dict[str, np.ndarray], int]:
            nonlocal pos
            if waiting is not None:
                rows = self._append(h[fresh], keys.iloc[fresh].reset_index(drop=True), waiting())
                row_of_hash = np.full(len(uniq), -1, dtype=np.int64)
                row_of_hash[np.searchsorted(uniq, h[fresh])] = rows
                pos = np.where(unknown, row_of_hash[inverse.reshape(-1)], pos)
            return {k: v[pos] for k, v in self._columns.items() if not k.startswith("__key__")}, len(fresh)

        return wait

    def score(self, table: Mapping[str, Any], score: Callable[[Mapping[str, Any]], Mapping[str, np.ndarray]]
              ) -> tuple[dict[str, np.ndarray], int]:
        """Results for every row of ``table`` (scoring only the distinct unknown designs) and how many were scored."""
        def now(sub):
            result = score(sub)
            return lambda: result

        return self.submit(table, now)()


def _key_path(spec: Spec, column: str | None) -> str:
    """Where a column comes from in the space file (for a one-line error)."""
    if column is None:
        return "space"
    if column in spec.workload:
        return f"workload.{column}"
    if any(d.name == column for d in spec.dimensions):
        return f"cluster.{column}"
    if column in spec.mapping:
        return f"mapping.{column}"
    return column


@contextlib.contextmanager
def _model_errors(spec: Spec):
    """A user error raised by the model (bad input) becomes a one-line UserError."""
    try:
        yield
    except Exception as exc:  # a model InputError, maybe wrapped by Ray
        cause = getattr(exc, "cause", None) or exc
        if type(cause).__name__ == "InputError" or isinstance(cause, ValueError) and hasattr(cause, "column"):
            detail = getattr(cause, "detail", str(cause))
            column = getattr(cause, "column", None)
            raise UserError(f"the model rejects this space: {detail}", where=f"{spec.source}: {_key_path(spec, column)}") from None
        raise


def _score_safely(score: Callable[[Mapping[str, Any]], Mapping[str, np.ndarray]], table: Mapping[str, Any],
                  spec: Spec) -> dict[str, np.ndarray]:
    """Score; a user error raised by the model (bad input) becomes a one-line UserError."""
    with _model_errors(spec):
        return dict(score(table))


def preflight(spec: Spec, score: ScoreFn, n: int = 8) -> None:
    """Score a few uniformly drawn designs in this process before a run starts, so that a space the model
    rejects (a fixed column out of range, say) is one line and exit 2 before anything is written."""
    rng = np.random.RandomState(spec.search.seed)
    space = Space(spec)
    from dse.samplers import sample_uniform

    params = [{name: sample_uniform(d, rng) for name, d in space.distributions.items()} for _ in range(n)]
    with np.errstate(all="ignore"):  # the error, if any, is the message; not the arithmetic on its way
        _score_safely(score, space.table(params), spec)


def _outcome(spec: Spec, scored: Mapping[str, np.ndarray], n: int) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """(objective values (n, m), Optuna constraints, model feasible, space constraints met)."""
    missing = [o.metric for o in spec.objectives if o.metric not in scored]
    missing += [c.column for c in spec.constraints if c.column not in scored]
    if missing:
        raise UserError(f"the scoring function returned no column {missing[0]!r}", where=spec.source)
    values = np.column_stack([np.asarray(scored[o.metric], dtype=np.float64) for o in spec.objectives])
    feasible = np.asarray(scored["feasible"], dtype=bool) if "feasible" in scored else np.ones(n, dtype=bool)
    con_cols = [k for k in scored if k.startswith("con_")]
    if con_cols:
        worst = np.max(np.column_stack([np.asarray(scored[k], dtype=np.float64) for k in con_cols]), axis=1)
        worst = np.where(np.isnan(worst), np.inf, worst)
    else:
        worst = np.zeros(n)
    model_violation = np.where(feasible, np.minimum(worst, 0.0), np.maximum(worst, 1e-9))
    constraints = {MODEL_CONSTRAINT: model_violation}
    meets = np.ones(n, dtype=bool)
    for c in spec.constraints:
        v = c.violation(scored[c.column])
        constraints[c.text] = v
        meets &= v <= 0
    return values, constraints, feasible, meets


def _open_run(spec: Spec | None, resume, run_dir, results, vocab) -> tuple[RunStore, Spec, dict[str, Any]]:
    """The run directory, the space and the stored run.json (empty for a new run)."""
    if resume is None:
        if spec is None:
            raise ValueError("run() needs a spec or resume=RUN_DIR")
        return RunStore.create(run_dir, results=results, name=spec.name), spec, {}
    store = RunStore.open(resume)
    info = store.read_run()
    if spec is None:  # the space as it was given, validated again against today's model
        spec = parse_spec(yaml.safe_load(info["spec_text"]), source=info.get("spec_source", str(store.run_json)),
                          text=info["spec_text"], default_name=info.get("spec", {}).get("name", "space"), vocab=vocab)
        if info.get("seed") is not None and info["seed"] != spec.search.seed:
            spec = spec.with_search(seed=int(info["seed"]))
    if info.get("space_hash") and info["space_hash"] != spec.space_hash:
        raise UserError("the space changed since this run started; start a new run", where="--resume")
    return store, spec, info


@dataclass
class _Batch:
    """One batch on its way through the engine: asked and submitted, told, committed."""

    index: int
    n: int
    trials: list = field(default_factory=list)
    params: list = field(default_factory=list)
    waiting: Callable[[], tuple[dict[str, np.ndarray], int]] | None = None
    scored: dict[str, np.ndarray] = field(default_factory=dict)
    values: np.ndarray | None = None
    constraints: dict[str, np.ndarray] = field(default_factory=dict)
    feasible: np.ndarray | None = None
    meets: np.ndarray | None = None
    record: dict[str, Any] | None = None
    #: the arguments of :func:`write_batch` for this batch (its part and journal records); a function that
    #: waits for the writer and returns what write_batch returns
    part: tuple | None = None
    writing: Callable[[], tuple[float, int | None]] | None = None
    #: seconds of each stage (see _BATCH_TIMERS); over a run they add up to the batch loop's wall time
    times: dict[str, float] = field(default_factory=dict)


class _Sweep:
    """The state of one run between batches; :func:`run` drives it (see the module doc)."""

    def __init__(self, store: RunStore, spec: Spec, info: Mapping[str, Any], cache_designs: bool):
        self.store, self.spec, self.info = store, spec, dict(info)
        self.space = Space(spec)
        s = spec.search
        self.total = min(s.trials, self.space.grid_size()) if s.sampler == "grid" else s.trials
        self.searcher = Searcher(self.space, s, spec.directions, journal_path=store.journal)
        self.cache = ScoreCache(self.space.design_columns if cache_designs else [])
        self.front = _Front(spec.directions)
        self.units: dict[str, str] | None = None  # of the part's columns (units_of), the same every batch
        self.units_of: list[str] = []
        self.writer_s = 0.0  # seconds the writer spent on parts
        #: trials committed / asked (asked runs one batch ahead of committed while a batch is scored)
        self.done = self.asked = self.batch_index = self.batches_asked = self.n_admissible = self.n_scored = 0
        self.meta = {
            "space_hash": spec.space_hash, "space": spec.name, "seed": s.seed, "sampler": s.sampler,
            "batch_size": s.batch_size, "versions": _versions(),
            "objectives": [{"metric": o.metric, "direction": o.direction} for o in spec.objectives],
            "constraints": [c.text for c in spec.constraints],
        }
        self.git_commit = info.get("git_commit") or _git_commit()
        self.created = info.get("created") or time.strftime("%Y-%m-%dT%H:%M:%S%z")
        kept = _BATCH_TIMERS + ("model", "startup", "writer")
        self.timings = {k: float(v) for k, v in (info.get("timings") or {}).items() if k in kept}
        for k in _BATCH_TIMERS:
            self.timings.setdefault(k, 0.0)

    def restore(self) -> None:
        """Rebuild the study, the cache and the counters from the committed parts (resume)."""
        torn = self.store.torn_parts()
        if torn:  # a torn part and every part after it run again (same seed: the same trials)
            first = self.store.parts().index(torn[0])
            later = self.store.parts()[first:]
            moved = self.store.set_aside(later)
            print(f"dse sweep: {torn[0].name} is torn (not a whole Parquet file); set aside as {moved[0].name} "
                  f"with the {len(later) - 1} part(s) after it, and their batches run again", file=sys.stderr)
        parts = self.store.parts()
        for i, p in enumerate(parts):
            if p != self.store.part_path(i):
                raise UserError(f"part files are not contiguous ({p.name} where part-{i:05d} was expected)",
                                where=str(self.store.root))
        if not parts:
            return
        self.done = self.asked = self.searcher.restore([read_metadata(p)["optuna"] for p in parts])
        self.batch_index = self.batches_asked = len(parts)
        prev = self.store.read_trials()
        admissible = prev["admissible"].to_numpy(dtype=bool)
        self.n_admissible = int(admissible.sum())
        self.front.add(prev[[o.metric for o in self.spec.objectives]].to_numpy(dtype=np.float64), admissible)
        derived = {"trial", "batch", "violation", "meets_constraints", "admissible"}
        self.cache.add_table({k: prev[k].to_numpy() for k in prev.columns if k not in derived})

    def run_info(self, status: str, **extra) -> dict[str, Any]:
        """run.json as of now (written at the start, after every batch and at the end)."""
        spec, info = self.spec, self.info
        return {
            "dse_version": __version__,
            "spec_source": spec.source,
            "spec_text": spec.text or yaml.safe_dump(dict(spec.raw), sort_keys=False),
            "spec": spec.resolved(),
            "space_hash": spec.space_hash,
            "seed": spec.search.seed,
            "sampler": spec.search.sampler,
            "versions": self.meta["versions"],
            "git_commit": self.git_commit,
            "created": self.created,
            "status": status,
            "trials_target": self.total,
            "trials_done": self.done,
            "batches_done": self.batch_index,
            "designs_scored": int(info.get("designs_scored", 0)) + self.n_scored,
            "resumes": int(info.get("resumes", -1)) + 1,
            "timings": dict(self.timings),
            **extra,
        }

    def start(self, pool: Pool) -> _Batch:
        """Ask the next batch and submit it to the pool (returns while the workers score it)."""
        n = min(self.spec.search.batch_size, self.total - self.asked)
        b = _Batch(index=self.batches_asked, n=n)
        self.batches_asked += 1
        t = time.perf_counter()
        b.trials, b.params = self.searcher.ask(n, b.index)
        self.asked += n
        b.times["ask"] = time.perf_counter() - t
        t = time.perf_counter()
        table = self.space.table(b.params)
        b.times["table"] = time.perf_counter() - t
        t = time.perf_counter()

        def submit(chunk):
            with _model_errors(self.spec):
                return pool.submit(chunk)

        b.waiting = self.cache.submit(table, submit)
        b.times["score"] = time.perf_counter() - t
        return b

    def tell(self, b: _Batch) -> None:
        """Wait for a submitted batch's results and tell them to the search (the next ask needs them)."""
        t = time.perf_counter()
        with _model_errors(self.spec):
            b.scored, n_scored = b.waiting()
        self.n_scored += n_scored
        b.times["score"] += time.perf_counter() - t
        t = time.perf_counter()
        b.values, b.constraints, b.feasible, b.meets = _outcome(self.spec, b.scored, b.n)
        self.searcher.tell(b.trials, b.values, b.constraints)
        b.times["tell"] = time.perf_counter() - t

    def send(self, b: _Batch, pool: Pool | None) -> None:
        """Record a told batch (before the next ask adds to the study) and hand its Parquet part and journal
        records to the pool's writer (:meth:`Pool.background`), which writes them while the next batch is
        asked; without a pool, write them now."""
        t = time.perf_counter()
        b.record = self.searcher.record(b.trials)
        b.times["record"] = time.perf_counter() - t
        t = time.perf_counter()
        columns: dict[str, Any] = {"trial": np.array([tr.number for tr in b.trials], dtype=np.int64),
                                   "batch": np.full(b.n, b.index, dtype=np.int64)}
        columns.update((k, v) for k, v in b.scored.items() if k not in columns)
        columns["violation"] = np.sum([np.maximum(v, 0) for v in b.constraints.values()], axis=0)
        columns["meets_constraints"] = b.meets
        columns["admissible"] = b.feasible & b.meets
        if self.units is None or self.units_of != list(columns):  # (the same columns every batch)
            self.units_of, self.units = list(columns), _units(list(columns))
        metadata = {**self.meta, "batch": b.index, "units": self.units, "optuna": b.record}
        b.part = (str(self.store.root), b.index, pack(columns), metadata, self.searcher.journal_target())
        if pool is not None:
            b.writing = pool.background(write_batch, *b.part)
        else:
            written = write_batch(*b.part)
            b.writing = lambda: written
        b.times["send"] = time.perf_counter() - t

    def commit(self, b: _Batch, pool: Pool | None = None) -> None:
        """Commit a told batch: its Parquet part (the commit point) and journal records written (sent now
        unless :meth:`send` sent them), then the counters. If the writer failed, the driver writes them."""
        if b.writing is None:
            self.send(b, pool)
        t = time.perf_counter()
        try:
            seconds, offset = b.writing()
        except Exception:  # the writer process is gone, or its write failed: the driver writes the batch
            seconds, offset = write_batch(*b.part)
        self.writer_s += seconds
        self.searcher.journal_appended(offset)
        b.times["write"] = time.perf_counter() - t
        admissible = b.feasible & b.meets
        self.done += b.n
        self.batch_index += 1
        self.n_admissible += int(admissible.sum())
        self.front.add(b.values, admissible)

    def finish(self, status: str, wall_s: float) -> pd.DataFrame:
        """Write the front and the final run.json (also after a stop or a failure)."""
        front = pd.DataFrame()
        if self.store.parts():
            try:
                front = write_front(self.store, self.spec, self.space, self.meta)
            except Exception:  # the front can be rebuilt later; keep the run's status truthful
                if status == "complete":
                    raise
        self.store.write_run(self.run_info(status, finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                          wall_s=round(float(self.info.get("wall_s", 0.0)) + wall_s, 3),
                                          front_size=int(len(front)), workers=self.info.get("workers")))
        return front


def run(
    spec: Spec | None = None,
    *,
    evaluate_fn: ScoreFn | None = None,
    run_dir: str | Path | None = None,
    results: str | Path = "results",
    resume: str | Path | None = None,
    use_ray: bool = True,
    workers: int | None = None,
    address: str | None = None,
    chunks_per_worker: int = 1,
    trials: int | None = None,
    progress: Progress | None = None,
    on_batch: Callable[[int, dict[str, float]], None] | None = None,
    vocab: Vocabulary | None = None,
    cache_designs: bool = True,
    report: bool | None = None,
) -> SweepResult:
    """Run (or, with ``resume=RUN_DIR``, continue) a sweep; see the module doc.

    ``trials`` overrides ``spec.search.trials`` (e.g. to extend a resumed run). ``on_batch(index, timings)``
    is called after every committed batch (benchmarks, tests). On resume without ``spec``, the stored space
    is validated again, against ``vocab`` (default: the installed model's). ``cache_designs=False`` scores
    a design again each time it is proposed (benchmarks of the scoring path). ``report`` writes
    ``report.html``/``report.md`` at the end (:mod:`dse.report`; default: a complete run scored by the model).
    """
    silence_optuna()
    t_start = time.perf_counter()
    if resume is None and spec is not None and evaluate_fn is None:
        preflight(spec, default_scorer(Space(spec)))
    store, spec, info = _open_run(spec, resume, run_dir, results, vocab)
    if trials is None and info.get("trials_target"):  # a resumed run keeps its target unless told otherwise
        trials = int(info["trials_target"])
    if trials is not None:
        spec = spec.with_search(trials=int(trials))
    sweep = _Sweep(store, spec, info, cache_designs)
    sweep.restore()
    extra = {"resumed": time.strftime("%Y-%m-%dT%H:%M:%S%z")} if resume is not None else {}
    store.write_run(sweep.run_info("running", **extra))

    progress = progress or Progress(enabled=False)
    score = evaluate_fn or default_scorer(sweep.space)
    status = "failed"
    pool: Pool | None = None
    told: _Batch | None = None  # told, not committed yet
    old_term = signal.getsignal(signal.SIGTERM)
    try:
        try:
            signal.signal(signal.SIGTERM, _raise_interrupt)  # a batch job's stop: like Ctrl-C
        except ValueError:  # not the main thread
            pass
        t0 = time.perf_counter()
        pool = open_pool(score, use_ray=use_ray, workers=workers, address=address, chunks_per_worker=chunks_per_worker)
        sweep.info["workers"] = pool.description
        sweep.timings["startup"] = sweep.timings.get("startup", 0.0) + time.perf_counter() - t0
        progress.start(total=sweep.total, done=sweep.done, where=str(store.root), pool=pool.description)
        t_loop, done_before = time.perf_counter(), sweep.done
        last_info = t_loop
        last_info = t_loop

        def committed(b: _Batch) -> None:  # the status file, the progress line, the timings
            nonlocal last_info
            t = time.perf_counter()
            if t - last_info >= RUN_JSON_EVERY_S:  # a status file: its counters may lag a little
                store.write_run(sweep.run_info("running", **extra, workers=pool.description))
                last_info = t
            progress.update(done=sweep.done, admissible=sweep.n_admissible, front=len(sweep.front.F),
                            rate=(sweep.done - done_before) / max(time.perf_counter() - t_loop, 1e-9))
            b.times["progress"] = time.perf_counter() - t
            for k, v in b.times.items():
                sweep.timings[k] += v
            if on_batch is not None:
                on_batch(b.index, dict(b.times))
            # the study only grows: keep Python's collector from rescanning every past trial each batch
            # (a full collection of a large study costs tens of milliseconds)
            gc.freeze()

        def commit_told() -> None:
            nonlocal told
            if told is not None:
                b, told = told, None  # not committed twice if the commit itself is interrupted
                sweep.commit(b, pool)
                committed(b)

        # one batch ahead: batch k is told and handed to the writer, which writes its part and journal records
        # while batch k+1 is asked (which needs batch k told) and submitted; batch k is committed (written,
        # counted) while the workers score batch k+1; then batch k+1 is told
        while sweep.asked < sweep.total:
            batch = sweep.start(pool)
            commit_told()
            sweep.tell(batch)
            told = batch
            sweep.send(batch, pool)
        commit_told()
        status = "complete"
    except KeyboardInterrupt:
        status = "stopped"
    finally:
        if told is not None:  # a told batch holds finished results: commit it, whatever stopped the loop
            try:  # (with the writer if it has the part already, else here)
                sweep.commit(told, pool if told.writing is not None else None)
            except KeyboardInterrupt:  # a second stop: the batch runs again on resume
                pass
        try:
            signal.signal(signal.SIGTERM, old_term)
        except ValueError:
            pass
        gc.unfreeze()
        if pool is not None:
            sweep.timings["model"] = sweep.timings.get("model", 0.0) + pool.actor_seconds
            sweep.timings["writer"] = sweep.timings.get("writer", 0.0) + sweep.writer_s
            pool.close()
        progress.finish()
        front = sweep.finish(status, time.perf_counter() - t_start)
    if report if report is not None else (status == "complete" and evaluate_fn is None):
        _write_report(store.root)
    return SweepResult(run_dir=store.root, status=status, n_trials=sweep.done, n_admissible=sweep.n_admissible,
                       front=front, n_scored=sweep.n_scored, timings=dict(sweep.timings),
                       wall_s=time.perf_counter() - t_start)


def _write_report(root: Path) -> None:
    """``report.html`` and ``report.md`` of a finished run (dse.report); a failure only warns."""
    try:
        from dse.report import write_report

        write_report(root)
    except Exception as exc:  # the run's results stand without their report: `dse report RUN_DIR` retries
        import sys

        print(f"dse sweep: report not written ({type(exc).__name__}: {exc}); try: dse report {root}", file=sys.stderr)


def write_front(store: RunStore, spec: Spec, space: Space, meta: Mapping[str, Any]) -> pd.DataFrame:
    """Compute the front of every committed design and write ``pareto.parquet`` (end of a run)."""
    frame = store.read_trials()
    objectives = {o.metric: o.direction for o in spec.objectives}
    front = front_table(frame, objectives, feasible="admissible", dedupe=space.design_columns or None)
    store.write_pareto(front, {**meta, "units": _units(list(front.columns)), "n_trials": int(len(frame))})
    return front

