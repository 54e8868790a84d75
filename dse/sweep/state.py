"""The state of one run between batches, and each batch on its way through the stages.

:class:`SweepState` composes the stages for one run: the space (design tables), the problem (objectives
and constraints), the searcher (Optuna), the score cache, the run's files and its journal, the running
front. :func:`dse.sweep.loop.run` drives it batch by batch: :meth:`~SweepState.start` (ask, build the
design table, submit it to the pool), :meth:`~SweepState.tell` (wait for the scores, tell the search),
:meth:`~SweepState.send` (record the batch and hand its part and journal records to the writer),
:meth:`~SweepState.commit` (wait for the writer, count the batch); :meth:`~SweepState.restore` on resume
and :meth:`~SweepState.finish` at the end.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dse.cluster import Pool, pack
from dse.errors import UserError
from dse.problem import Outcome, Problem, model_errors
from dse.space import Space
from dse.spec import Spec
from dse.store import RunningFront, RunStore, read_metadata, write_front
from dse.study import JournalMirror, Searcher
from dse.sweep.cache import ScoreCache
from dse.sweep.run_info import git_commit, run_json, run_metadata, units
from dse.sweep.writer import Writer, write_batch

__all__ = ["SweepState", "Batch", "BATCH_TIMERS"]

#: the stages of a batch, timed (over a run they add up to the batch loop's wall time)
BATCH_TIMERS = ("ask", "table", "score", "tell", "record", "send", "write", "progress")


@dataclass
class Batch:
    """One batch on its way through the engine: asked and submitted, told, sent, committed."""

    index: int
    n: int
    trials: list = field(default_factory=list)
    params: list = field(default_factory=list)
    waiting: Callable[[], tuple[dict[str, np.ndarray], int]] | None = None
    scored: dict[str, np.ndarray] = field(default_factory=dict)
    outcome: Outcome | None = None
    record: dict[str, Any] | None = None
    #: the arguments of :func:`write_batch` for this batch (its part and journal records); a function that
    #: waits for the writer and returns what write_batch returns
    part: tuple | None = None
    writing: Callable[[], tuple[float, int | None]] | None = None
    #: seconds of each stage (see BATCH_TIMERS)
    times: dict[str, float] = field(default_factory=dict)


class SweepState:
    """The state of one run between batches (see the module doc)."""

    def __init__(self, store: RunStore, spec: Spec, info: Mapping[str, Any], cache_designs: bool) -> None:
        self.store, self.spec, self.info = store, spec, dict(info)
        self.space = Space(spec)
        self.problem = Problem(spec)
        s = spec.search
        self.total = min(s.trials, self.space.grid_size()) if s.sampler == "grid" else s.trials
        self.searcher = Searcher(self.space, s, spec.directions)
        self.journal = JournalMirror(store.journal, self.searcher.directions, self.space.distributions)
        self.cache = ScoreCache(self.space.design_columns if cache_designs else [])
        self.front = RunningFront(spec.directions)
        self.units: dict[str, str] | None = None  # of the part's columns (units_of), the same every batch
        self.units_of: list[str] = []
        self.writer_s = 0.0  # seconds the writer spent on parts
        #: trials committed / asked (asked runs one batch ahead of committed while a batch is scored)
        self.done = self.asked = self.batch_index = self.batches_asked = self.n_admissible = self.n_scored = 0
        self.meta = run_metadata(spec)
        self.git_commit = info.get("git_commit") or git_commit()
        self.created = info.get("created") or time.strftime("%Y-%m-%dT%H:%M:%S%z")
        kept = BATCH_TIMERS + ("model", "startup", "writer")
        self.timings = {k: float(v) for k, v in (info.get("timings") or {}).items() if k in kept}
        for k in BATCH_TIMERS:
            self.timings.setdefault(k, 0.0)

    def restore(self) -> None:
        """Rebuild the study, the journal, the cache and the counters from the committed parts (resume)."""
        for line in self.store.settle_parts(self.spec.space_hash, self.spec.search.seed):  # (dse.store.parts)
            print(f"dse sweep: {line}", file=sys.stderr)
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
        records = [read_metadata(p)["optuna"] for p in parts]
        self.done = self.asked = self.searcher.restore(records)
        self.journal.agree(records, self.searcher.study.get_trials(deepcopy=False))
        self.batch_index = self.batches_asked = len(parts)
        prev = self.store.read_trials()
        admissible = prev["admissible"].to_numpy(dtype=bool)
        self.n_admissible = int(admissible.sum())
        self.front.add(prev[self.problem.objectives].to_numpy(dtype=np.float64), admissible)
        derived = {"trial", "batch", "violation", "meets_constraints", "admissible"}
        self.cache.add_table({k: prev[k].to_numpy() for k in prev.columns if k not in derived})

    def run_info(self, status: str, **extra: Any) -> dict[str, Any]:
        """run.json as of now (written at the start, after every few batches and at the end)."""
        info = self.info
        return run_json(
            self.spec, self.meta["versions"],
            git_commit=self.git_commit,
            created=self.created,
            status=status,
            trials_target=self.total,
            trials_done=self.done,
            batches_done=self.batch_index,
            designs_scored=int(info.get("designs_scored", 0)) + self.n_scored,
            resumes=int(info.get("resumes", -1)) + 1,
            timings=dict(self.timings),
            **extra,
        )

    def start(self, pool: Pool) -> Batch:
        """Ask the next batch and submit it to the pool (returns while the workers score it)."""
        n = min(self.spec.search.batch_size, self.total - self.asked)
        b = Batch(index=self.batches_asked, n=n)
        self.batches_asked += 1
        t = time.perf_counter()
        b.trials, b.params = self.searcher.ask(n, b.index)
        self.asked += n
        b.times["ask"] = time.perf_counter() - t
        t = time.perf_counter()
        with model_errors(self.spec):  # one design, one row: a renting row's gpu its instance's (dse.space)
            table = self.space.canonical(self.space.table(b.params))
        b.times["table"] = time.perf_counter() - t
        t = time.perf_counter()

        def submit(chunk: Mapping[str, Any]) -> Callable[[], dict[str, np.ndarray]]:
            with model_errors(self.spec):
                return pool.submit(chunk)

        b.waiting = self.cache.submit(table, submit)
        b.times["score"] = time.perf_counter() - t
        return b

    def tell(self, b: Batch) -> None:
        """Wait for a submitted batch's results and tell them to the search (the next ask needs them)."""
        t = time.perf_counter()
        with model_errors(self.spec):
            b.scored, n_scored = b.waiting()
        self.n_scored += n_scored
        b.times["score"] += time.perf_counter() - t
        t = time.perf_counter()
        b.outcome = self.problem.outcome(b.scored, b.n)
        self.searcher.tell(b.trials, b.outcome.values, b.outcome.constraints)
        b.times["tell"] = time.perf_counter() - t

    def send(self, b: Batch, writer: Writer | None) -> None:
        """Record a told batch (before the next ask adds to the study) and hand its Parquet part and journal
        records to the writer, which writes them while the next batch is asked; without one, write them now."""
        t = time.perf_counter()
        b.record = self.searcher.record(b.trials)
        b.times["record"] = time.perf_counter() - t
        t = time.perf_counter()
        out = b.outcome
        columns: dict[str, Any] = {"trial": np.array([tr.number for tr in b.trials], dtype=np.int64),
                                   "batch": np.full(b.n, b.index, dtype=np.int64)}
        columns.update((k, v) for k, v in b.scored.items() if k not in columns)
        columns["violation"] = out.violation
        columns["meets_constraints"] = out.meets
        columns["admissible"] = out.admissible
        if self.units is None or self.units_of != list(columns):  # (the same columns every batch)
            self.units_of, self.units = list(columns), units(list(columns))
        metadata = {**self.meta, "batch": b.index, "units": self.units, "optuna": b.record}
        b.part = (str(self.store.root), b.index, pack(columns), metadata, self.journal.target())
        if writer is not None:
            b.writing = writer.call(write_batch, *b.part)
        else:
            written = write_batch(*b.part)
            b.writing = lambda: written
        b.times["send"] = time.perf_counter() - t

    def commit(self, b: Batch, writer: Writer | None = None) -> None:
        """Commit a told batch: its Parquet part (the commit point) and journal records written (sent now
        unless :meth:`send` sent them), then the counters. If the writer failed, the driver writes them."""
        if b.writing is None:
            self.send(b, writer)
        t = time.perf_counter()
        try:
            seconds, offset = b.writing()
        except Exception:  # the writer process is gone, or its write failed: the driver writes the batch
            seconds, offset = write_batch(*b.part)
        self.writer_s += seconds
        self.journal.appended(offset)
        b.times["write"] = time.perf_counter() - t
        admissible = b.outcome.admissible
        self.done += b.n
        self.batch_index += 1
        self.n_admissible += int(admissible.sum())
        self.front.add(b.outcome.values, admissible)

    def finish(self, status: str, wall_s: float) -> pd.DataFrame:
        """Write the front and the final run.json (also after a stop or a failure)."""
        front = pd.DataFrame()
        if self.store.parts():
            try:
                objectives = {o.metric: o.direction for o in self.spec.objectives}
                front = write_front(self.store, objectives, self.space.design_columns, self.meta, units)
            except Exception:  # the front can be rebuilt later; keep the run's status truthful
                if status == "complete":
                    raise
        self.store.write_run(self.run_info(status, finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                          wall_s=round(float(self.info.get("wall_s", 0.0)) + wall_s, 3),
                                          front_size=int(len(front)), workers=self.info.get("workers")))
        return front
