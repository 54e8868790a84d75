"""The store stage: a run's files (``run.json``, the Parquet part of every batch, ``pareto.parquet``) and
its Pareto front.

:mod:`~dse.store.run_store` (the run directory, written atomically), :mod:`~dse.store.pareto` (fronts and
hypervolume of objective tables) and :mod:`~dse.store.front` (the run's front, during and after the run).
"""

from dse.store.front import RunningFront, write_front
from dse.store.pareto import front_table, hypervolume, nondominated_mask, nondominated_rank, reference_point, to_minimization
from dse.store.run_store import META_PREFIX, RawJSON, RunStore, atomic_write_bytes, read_metadata, to_arrow

__all__ = ["RunStore", "atomic_write_bytes", "to_arrow", "read_metadata", "RawJSON", "META_PREFIX", "RunningFront",
           "write_front", "front_table", "hypervolume", "nondominated_mask", "nondominated_rank", "reference_point",
           "to_minimization"]
