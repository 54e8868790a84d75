"""The sweep: one run of the engine, composing the stages batch by batch (docs/architecture.md).

:mod:`~dse.sweep.loop` (:func:`run`, the batch loop), :mod:`~dse.sweep.state` (the run between batches,
and a batch on its way), :mod:`~dse.sweep.opening` (a new run or a resumed one), :mod:`~dse.sweep.cache`
(designs scored once), :mod:`~dse.sweep.writer` and :mod:`~dse.sweep.background` (the writer of parts
and journal records, beside the driver), :mod:`~dse.sweep.run_info` (``run.json`` and the files'
metadata) and :mod:`~dse.sweep.progress` (the progress line and the closing table).
"""

from dse.problem import MODEL_CONSTRAINT, default_scorer, score_with_mapping_search
from dse.store import write_front
from dse.sweep.cache import ScoreCache
from dse.sweep.loop import SweepResult, run
from dse.sweep.opening import preflight

__all__ = ["run", "SweepResult", "ScoreCache", "preflight", "score_with_mapping_search", "default_scorer",
           "write_front", "MODEL_CONSTRAINT"]
