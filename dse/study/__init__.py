"""The study stage: Optuna asked and told in whole batches, and what a run keeps of it.

:mod:`~dse.study.searcher` (the study: ask, tell, record, restore), :mod:`~dse.study.records` (a told
batch as plain JSON, and trials rebuilt from it), :mod:`~dse.study.journal` (the run's Optuna journal
file), :mod:`~dse.study.samplers` (NSGA-II for whole generations, the grid, Optuna's TPE and random) and
:mod:`~dse.study.internals` (the one module that touches Optuna's private names, and why).
"""

from dse.study.journal import JournalMirror, JournalTarget, append_journal, journal_lines
from dse.study.records import STUDY_NAME, EncodedRecord, batch_record, internal_column, trials_from_records
from dse.study.samplers import uniform_params
from dse.study.searcher import Searcher, silence_optuna

__all__ = ["Searcher", "silence_optuna", "STUDY_NAME", "JournalMirror", "JournalTarget", "append_journal",
           "journal_lines", "EncodedRecord", "batch_record", "internal_column", "trials_from_records",
           "uniform_params"]
