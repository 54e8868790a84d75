"""Scoring design tables on Ray actors, in chunks (or in-process with :class:`LocalPool`).

The engine hands a pool one batch at a time (:meth:`Pool.submit`): the batch's design table is cut into one
chunk per worker (or a few), each chunk goes to a free actor as a dict of numpy arrays, the actor runs the
scoring function over the whole chunk in one vectorized call, and the chunks' result tables are joined
back in order. Actors are started once per run and reused, so a batch costs one task per chunk: never one
task per design, and no Ray Tune. This module knows nothing of Optuna.

When each method is called: :func:`open_pool` once per run (it joins or starts Ray), :meth:`Pool.submit`
once per batch (it returns at once; the function it returns waits for the batch's results), :meth:`Pool.close` at the end of the run (it leaves a Ray it did not start running).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dse.background import BackgroundProcess
from dse.errors import UserError
from dse.ray_auth import explain, join_with_token

__all__ = ["Pool", "LocalPool", "RayPool", "open_pool", "split", "concat", "pack", "unpack", "ScoreFn",
           "keep_freed_memory"]

#: a scoring function: design table -> result table (one row per input row)
ScoreFn = Callable[[Mapping[str, Any]], Mapping[str, np.ndarray]]


def _n_rows(table: Mapping[str, Any]) -> int:
    return max((len(v) for v in table.values() if np.ndim(v) > 0), default=1)


def split(table: Mapping[str, Any], n_chunks: int) -> list[dict[str, Any]]:
    """Cut a design table into ``n_chunks`` contiguous chunks of nearly equal size (scalars are shared)."""
    n = _n_rows(table)
    n_chunks = max(1, min(n_chunks, n))
    bounds = np.linspace(0, n, n_chunks + 1).round().astype(int)
    return [
        {k: (v[a:b] if np.ndim(v) > 0 else v) for k, v in table.items()}
        for a, b in zip(bounds[:-1], bounds[1:])
    ]


def concat(parts: list[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Join result chunks in order (every chunk has the same columns)."""
    if len(parts) == 1:
        return {k: np.asarray(v) for k, v in parts[0].items()}
    out = {}
    for k in parts[0]:
        out[k] = np.concatenate([np.broadcast_to(np.asarray(p[k]), (_n_rows(p),)) if np.ndim(p[k]) == 0 else np.asarray(p[k]) for p in parts])
    return out


class Pool:
    """Something that scores design tables; see :class:`LocalPool` and :class:`RayPool`."""

    n_workers: int = 1
    description: str = ""
    #: seconds spent inside the scoring function, summed over chunks (for the time breakdown)
    actor_seconds: float = 0.0

    def submit(self, table: Mapping[str, Any]) -> Callable[[], dict[str, np.ndarray]]:
        """Start scoring a whole batch and return at once; the returned function waits for the result
        (rows in the order of the input rows). Called once per batch: the engine commits the previous
        batch while the workers score this one."""
        raise NotImplementedError

    def map(self, table: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Score a whole batch and wait for it."""
        return self.submit(table)()

    def background(self, fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        """Run ``fn(*args)`` where the driver's files are, beside the driver, and return at once; the
        returned function waits for (and returns) its result. Called once per batch by the engine to write
        the batch's Parquet part while the driver asks the next batch. Here: in this process, now."""
        result = fn(*args)
        return lambda: result

    def close(self) -> None:
        """Release workers (called once, at the end of the run)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LocalPool(Pool):
    """Scores in the calling process (``--no-ray``): for tiny runs, tests and profiling. Nothing overlaps:
    :meth:`submit` scores before it returns."""

    def __init__(self, score: ScoreFn):
        self._score = score
        self.n_workers = 1
        self.description = "in-process (no Ray)"

    def submit(self, table):
        t0 = time.perf_counter()
        out = {k: np.asarray(v) for k, v in self._score(table).items()}
        self.actor_seconds += time.perf_counter() - t0
        return lambda: out


def pack(table: Mapping[str, np.ndarray]) -> tuple:
    """A result table as few buffers: the float64 columns stacked into one 2-D block, the rest as they are.

    Ray serializes each array separately; a model's hundred-odd float columns cost far more as hundred-odd
    arrays than as one block. :func:`unpack` restores the table (columns are rows of the block: views).
    """
    floats = [k for k, v in table.items() if v.dtype == np.float64 and v.ndim == 1]
    block = np.stack([table[k] for k in floats]) if floats else np.zeros((0, 0))
    stacked = set(floats)
    rest = {k: v for k, v in table.items() if k not in stacked}
    return list(table), floats, block, rest


def unpack(packed: tuple) -> dict[str, np.ndarray]:
    """The table :func:`pack` packed, columns in their original order."""
    order, floats, block, rest = packed
    cols = dict(zip(floats, block))
    cols.update(rest)
    return {k: cols[k] for k in order}


#: glibc ``mallopt`` parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_memory(trim_threshold_bytes: int = 1 << 30, mmap_threshold_bytes: int = 32 << 20) -> bool:
    """Let this process's allocator reuse the memory numpy frees instead of handing it back to the OS.

    The mapping search makes and frees thousands of temporary columns of 10^4-10^5 floats per chunk. By
    default glibc serves each one above 128 KiB with a fresh ``mmap`` and trims the heap whenever 128 KiB
    lie free at its top, so the next temporary page-faults its memory in again, zeroed by the kernel:
    about 30-40 faults and a fifth to a quarter of the model's time in the kernel per design, measured on a 2-core VM
    (``sys`` time, ``getrusage``). With the trim threshold at 1 GiB and the mmap threshold at 32 MiB (its
    64-bit maximum) the heap stays at its peak (a few hundred MB for a chunk) and faults drop to zero.
    Called once in each scoring actor, which does nothing else; a no-op returning False where the C
    library is not glibc."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold_bytes)) and bool(
            libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold_bytes))
    except (OSError, AttributeError):
        return False


class _Scorer:
    """The body of a Ray actor: holds the scoring function, scores whole chunks."""

    def __init__(self, score: ScoreFn):
        self._score = score
        keep_freed_memory()

    def score(self, chunk: Mapping[str, Any]) -> tuple[tuple, float]:
        """Called once per chunk; returns the packed result table and the seconds spent scoring it."""
        t0 = time.perf_counter()
        out = {k: np.asarray(v) for k, v in self._score(chunk).items()}
        return pack(out), time.perf_counter() - t0

    def ping(self) -> int:
        return os.getpid()


class RayPool(Pool):
    """``n_workers`` Ray actors, each scoring one chunk at a time; started once, reused every batch.

    A killed actor is restarted by Ray and its chunk retried (``max_restarts``, ``max_task_retries``), so
    the batch completes and no finished trial is lost. :meth:`background` work runs in a child process of
    the driver (:class:`dse.background.BackgroundProcess`), on the driver's machine, where the run's files
    are; if it is lost, the engine writes in the driver.
    """

    def __init__(self, score: ScoreFn, n_workers: int, chunks_per_worker: int = 1, started_ray: bool = False,
                 where: str = "Ray"):
        import ray

        self._ray = ray
        self._started_ray = started_ray
        self.n_workers = n_workers
        self.chunks_per_worker = chunks_per_worker
        cpus = ray.cluster_resources().get("CPU", 1.0)
        per_actor = min(1.0, cpus / n_workers)
        actor = ray.remote(_Scorer).options(num_cpus=per_actor, max_restarts=3, max_task_retries=3)
        self._actors = [actor.remote(score) for _ in range(n_workers)]
        self._writer: BackgroundProcess | None = BackgroundProcess()  # starts while the actors start
        ray.get([a.ping.remote() for a in self._actors])  # started and fail here, not in the first batch
        from ray.util import ActorPool

        self._pool = ActorPool(self._actors)
        self.description = f"{n_workers} Ray actor{'s' if n_workers != 1 else ''} ({where})"
        self.actor_seconds = 0.0

    def background(self, fn, *args):
        """In the writer process (see the class doc); ``fn`` and ``args`` travel pickled."""
        return self._writer.call(fn, *args)

    def submit(self, table):
        """One chunk per actor by default (a Ray task costs milliseconds here, whatever its size); with
        ``chunks_per_worker`` > 1, chunks go to whichever actor is free. Results keep input order."""
        chunks = split(table, self.n_workers * self.chunks_per_worker)
        for chunk in chunks:
            self._pool.submit(lambda actor, c: actor.score.remote(c), chunk)

        def wait() -> dict[str, np.ndarray]:
            results = [self._pool.get_next() for _ in chunks]
            self.actor_seconds += sum(r[1] for r in results)
            return concat([unpack(r[0]) for r in results])

        return wait

    def close(self):
        for a in self._actors:
            try:
                self._ray.kill(a)
            except Exception:  # already gone
                pass
        self._actors = []
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._started_ray and self._ray.is_initialized():
            self._ray.shutdown()


def open_pool(score: ScoreFn, *, use_ray: bool = True, workers: int | None = None, address: str | None = None,
              chunks_per_worker: int = 1) -> Pool:
    """A pool for one run (called once per run by :mod:`dse.sweep`).

    ``use_ray=False``: :class:`LocalPool`. Otherwise join Ray at ``address`` (``auto`` or ``ray://host:port``;
    the ``dse`` and ``objectives`` packages travel with the job as ``py_modules``; a token-authenticated
    cluster's token is found and presented by :mod:`dse.ray_auth`) or, without an address,
    reuse a Ray already started in this process or start an embedded local one. ``workers`` defaults to
    the CPUs Ray offers.
    """
    if not use_ray:
        return LocalPool(score)
    import ray

    # a driver run by `ray job submit` (or given RAY_ADDRESS) joins that cluster rather than starting one
    in_job = bool(os.environ.get("RAY_ADDRESS"))  # the job's own runtime env already carries the code
    address = address or os.environ.get("RAY_ADDRESS") or None
    started = False
    where = f"Ray cluster at {address}" if address else "embedded Ray"
    if ray.is_initialized():
        where = "the Ray this process joined"
    else:
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True, "logging_level": "ERROR",
                                  "configure_logging": True}
        try:
            if address:  # ship this code to the cluster's workers, which may not have it installed
                import objectives

                import dse

                env = {} if in_job else {"runtime_env": {"py_modules": [dse, objectives]}}
                token = join_with_token(address)  # the cluster's token, if it asks for one
                where += f", {token}" if token else ""
                ray.init(address=address, **env, **kwargs)
            else:
                ray.init(num_cpus=max(workers or 0, os.cpu_count() or 1), **kwargs)
        except (ConnectionError, RuntimeError, ValueError, ray.exceptions.AuthenticationError) as exc:
            explained = explain(exc, address) if address else None  # a missing or refused token
            if explained is not None:
                raise explained from None
            what = f"cannot join the Ray cluster at {address}" if address else "cannot start a local Ray"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"{what}: {first}", where="--address" if address else "ray") from None
        started = True
    n = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    if n < 1:
        raise UserError("must be at least 1", where="--workers")
    return RayPool(score, n, chunks_per_worker=chunks_per_worker, started_ray=started, where=where)
