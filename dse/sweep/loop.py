"""One sweep, end to end: space -> Optuna batches -> actors -> tell -> Parquet -> Pareto front.

:func:`run` is the engine's main loop; it only composes the stages (docs/architecture.md). Per batch it
asks the searcher for a batch of designs (:mod:`dse.study`), builds one columnar design table
(:mod:`dse.space`), submits it to the pool, which scores it in chunks (:mod:`dse.cluster`; by default each
design's best feasible mapping from ``objectives.search_mapping``), tells every trial its objective
values and constraint violations (:mod:`dse.problem`), and commits the batch: one Parquet part
(:mod:`dse.store`), then its records appended to the Optuna journal; then it updates the progress line.
A told batch goes to the sweep's writer (:mod:`dse.sweep.writer`, with Ray a process beside the driver),
which writes its part and journal records while the driver asks the next batch (asking needs only the
previous batch told); the driver waits for them while the workers score that next batch. So the writing
overlaps both the sampler and the model, off the driver's GIL. At the end it writes ``pareto.parquet``
and the report, and returns a :class:`SweepResult`.

The scoring function is injectable (``run(spec, evaluate_fn=...)``): tests drive the engine with toy
functions; any function from a design table to a result table with the objective and constraint columns
will do. It must be picklable (a module-level function or a ``functools.partial`` of one) to go to Ray.

Feasibility is data: a design whose best mapping is infeasible, or that breaks a space constraint, is told
to Optuna with its objective values and a positive constraint violation, and is stored like any other.
"""

from __future__ import annotations

import gc
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import pandas as pd

from dse.cluster import Pool, open_pool
from dse.problem import ScoreFn, default_scorer
from dse.space import Space
from dse.spec import Spec, Vocabulary
from dse.study import silence_optuna
from dse.sweep.opening import open_run, preflight
from dse.sweep.progress import Progress
from dse.sweep.state import Batch, SweepState
from dse.sweep.writer import Writer, open_writer

__all__ = ["run", "SweepResult", "RUN_JSON_EVERY_S"]

#: run.json is rewritten at most this often while batches run (and always at the start and the end)
RUN_JSON_EVERY_S = 2.0


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
        """Designs committed per second of the run's wall time."""
        return self.n_trials / self.wall_s if self.wall_s > 0 else 0.0


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


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
    store, spec, info = open_run(spec, resume, run_dir, results, vocab)
    if trials is None and info.get("trials_target"):  # a resumed run keeps its target unless told otherwise
        trials = int(info["trials_target"])
    if trials is not None:
        spec = spec.with_search(trials=int(trials))
    sweep = SweepState(store, spec, info, cache_designs)
    sweep.restore()
    extra = {"resumed": time.strftime("%Y-%m-%dT%H:%M:%S%z")} if resume is not None else {}
    store.write_run(sweep.run_info("running", **extra))

    progress = progress or Progress(enabled=False)
    score = evaluate_fn or default_scorer(sweep.space)
    status = "failed"
    pool: Pool | None = None
    writer: Writer | None = None
    told: Batch | None = None  # told, not committed yet
    old_term = signal.getsignal(signal.SIGTERM)
    try:
        try:
            signal.signal(signal.SIGTERM, _raise_interrupt)  # a batch job's stop: like Ctrl-C
        except ValueError:  # not the main thread
            pass
        t0 = time.perf_counter()
        writer = open_writer(in_process=not use_ray)  # a writer process starts while Ray starts
        pool = open_pool(score, use_ray=use_ray, workers=workers, address=address, chunks_per_worker=chunks_per_worker)
        sweep.info["workers"] = pool.description
        sweep.timings["startup"] = sweep.timings.get("startup", 0.0) + time.perf_counter() - t0
        progress.start(total=sweep.total, done=sweep.done, where=str(store.root), pool=pool.description)
        t_loop, done_before = time.perf_counter(), sweep.done
        last_info = t_loop

        def committed(b: Batch) -> None:  # the status file, the progress line, the timings
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
            gc.freeze()

        def commit_told() -> None:
            nonlocal told
            if told is not None:
                b, told = told, None  # not committed twice if the commit itself is interrupted
                sweep.commit(b, writer)
                committed(b)

        # one batch ahead: batch k is told and handed to the writer, which writes its part and journal records
        # while batch k+1 is asked (which needs batch k told) and submitted; batch k is committed (written,
        # counted) while the workers score batch k+1; then batch k+1 is told
        while sweep.asked < sweep.total:
            batch = sweep.start(pool)
            commit_told()
            sweep.tell(batch)
            told = batch
            sweep.send(batch, writer)
        commit_told()
        status = "complete"
    except KeyboardInterrupt:
        status = "stopped"
    finally:
        if told is not None:  # a told batch holds finished results: commit it, whatever stopped the loop
            try:  # (with the writer if it has the part already, else here)
                sweep.commit(told, writer if told.writing is not None else None)
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
        if writer is not None:
            writer.close()
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
        print(f"dse sweep: report not written ({type(exc).__name__}: {exc}); try: dse report {root}", file=sys.stderr)
