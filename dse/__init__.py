"""dse: design-space exploration of AI GPU clusters.

The engine drives the analytical models of the sibling package ``objectives``, one package per stage in
the order data flows (docs/architecture.md): a space file is parsed and validated (:mod:`dse.spec`), made
Optuna distributions and design tables (:mod:`dse.space`); :mod:`dse.problem` says what a design is worth
and must meet; Optuna proposes designs in batches (:mod:`dse.study`); the pools score them on Ray actors
(:mod:`dse.cluster`); the run's files and front are written (:mod:`dse.store`) and reported on
(:mod:`dse.report`). :mod:`dse.sweep` composes them into a run, and :mod:`dse.cli` with
:mod:`dse.commands` is the ``dse`` command.
"""

__version__ = "0.1.0"

#: the engine's stages in the order data flows, each with the modules it holds (a module belongs to the
#: first entry that is its name or a package above it): a module imports from its own stage or an earlier
#: one, never a later one (tests/test_layout.py walks the imports)
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("dse.errors",)),
    ("spec", ("dse.spec",)),
    ("space", ("dse.space",)),
    ("problem", ("dse.problem",)),
    ("study", ("dse.study",)),
    ("cluster", ("dse.cluster",)),
    ("store", ("dse.store", "dse.parquet", "dse.arrow", "dse.tables", "dse.train_logs")),
    ("report", ("dse.report",)),
    ("launch", ("dse.launch",)),
    ("sweep", ("dse.sweep",)),
    ("command", ("dse.commands", "dse.cli")),
)
