"""The cluster stage: scoring whole design tables on Ray actors (or in this process), in chunks.

:mod:`~dse.cluster.pools` (the pools: :func:`open_pool`, :class:`LocalPool`, :class:`RayPool`),
:mod:`~dse.cluster.columns` (tables cut into chunks and packed into few buffers) and
:mod:`~dse.cluster.memory` (the actors' allocator). Nothing here knows Optuna or the run's files.
"""

from dse.cluster.columns import concat, n_rows, pack, split, unpack
from dse.cluster.memory import keep_freed_memory
from dse.cluster.pools import LocalPool, Pool, RayPool, open_pool

__all__ = ["Pool", "LocalPool", "RayPool", "open_pool", "split", "concat", "pack", "unpack", "n_rows",
           "keep_freed_memory"]
