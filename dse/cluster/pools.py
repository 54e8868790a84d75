"""Scoring design tables on Ray actors, in chunks (or in-process with :class:`LocalPool`).

The engine hands a pool one batch at a time (:meth:`Pool.submit`): the batch's design table is cut into one
chunk per worker (or a few), each chunk goes to a free actor as a dict of numpy arrays, the actor runs the
scoring function over the whole chunk in one vectorized call, and the chunks' result tables are joined
back in order. Actors are started once per run and reused, so a batch costs one task per chunk: never one
task per design, and no Ray Tune. This module knows nothing of Optuna.

When each method is called: :func:`open_pool` once per run (it joins or starts Ray), :meth:`Pool.submit`
once per batch (it returns at once; the function it returns waits for the batch's results),
:meth:`Pool.close` at the end of the run (it leaves a Ray it did not start running). A pool only scores:
the run's files are written by the sweep's own writer (:mod:`dse.sweep.writer`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dse.cluster.columns import concat, pack, split, unpack
from dse.cluster.memory import keep_freed_memory
from dse.cluster.ray_auth import explain, join_with_token
from dse.errors import UserError
from dse.problem import ScoreFn

__all__ = ["Pool", "LocalPool", "RayPool", "open_pool"]


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

    def close(self) -> None:
        """Release workers (called once, at the end of the run)."""

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalPool(Pool):
    """Scores in the calling process (``--no-ray``): for tiny runs, tests and profiling. Nothing overlaps:
    :meth:`submit` scores before it returns."""

    def __init__(self, score: ScoreFn) -> None:
        self._score = score
        self.n_workers = 1
        self.description = "in-process (no Ray)"

    def submit(self, table: Mapping[str, Any]) -> Callable[[], dict[str, np.ndarray]]:
        t0 = time.perf_counter()
        out = {k: np.asarray(v) for k, v in self._score(table).items()}
        self.actor_seconds += time.perf_counter() - t0
        return lambda: out


class _Scorer:
    """The body of a Ray actor: holds the scoring function, scores whole chunks."""

    def __init__(self, score: ScoreFn) -> None:
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
    the batch completes and no finished trial is lost.
    """

    def __init__(self, score: ScoreFn, n_workers: int, chunks_per_worker: int = 1, started_ray: bool = False,
                 where: str = "Ray") -> None:
        import ray

        self._ray = ray
        self._started_ray = started_ray
        self.n_workers = n_workers
        self.chunks_per_worker = chunks_per_worker
        cpus = ray.cluster_resources().get("CPU", 1.0)
        per_actor = min(1.0, cpus / n_workers)
        actor = ray.remote(_Scorer).options(num_cpus=per_actor, max_restarts=3, max_task_retries=3)
        self._actors = [actor.remote(score) for _ in range(n_workers)]
        ray.get([a.ping.remote() for a in self._actors])  # started and fail here, not in the first batch
        from ray.util import ActorPool

        self._pool = ActorPool(self._actors)
        self.description = f"{n_workers} Ray actor{'s' if n_workers != 1 else ''} ({where})"
        self.actor_seconds = 0.0

    def submit(self, table: Mapping[str, Any]) -> Callable[[], dict[str, np.ndarray]]:
        """One chunk per actor by default (a Ray task has a fixed cost, whatever its size); with
        ``chunks_per_worker`` > 1, chunks go to whichever actor is free. Results keep input order."""
        chunks = split(table, self.n_workers * self.chunks_per_worker)
        for chunk in chunks:
            self._pool.submit(lambda actor, c: actor.score.remote(c), chunk)

        def wait() -> dict[str, np.ndarray]:
            results = [self._pool.get_next() for _ in chunks]
            self.actor_seconds += sum(r[1] for r in results)
            return concat([unpack(r[0]) for r in results])

        return wait

    def close(self) -> None:
        for a in self._actors:
            try:
                self._ray.kill(a)
            except Exception:  # already gone
                pass
        self._actors = []
        if self._started_ray and self._ray.is_initialized():
            self._ray.shutdown()


def open_pool(score: ScoreFn, *, use_ray: bool = True, workers: int | None = None, address: str | None = None,
              chunks_per_worker: int = 1) -> Pool:
    """A pool for one run (called once per run by the sweep, :mod:`dse.sweep.loop`).

    ``use_ray=False``: :class:`LocalPool`. Otherwise join Ray at ``address`` (``auto`` or ``ray://host:port``;
    the ``dse`` and ``objectives`` packages travel with the job as ``py_modules``; a token-authenticated
    cluster's token is found and presented by :mod:`dse.cluster.ray_auth`) or, without an address,
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
                import dse
                import objectives

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
