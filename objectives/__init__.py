"""Analytical performance models of LLM training on GPU clusters, vectorized over design tables.

Public API (the engine uses only these; see docs/model-contract.md):

- :func:`evaluate` — metrics of designs with a fixed mapping (``models=TRAINING_MODELS``: the training
  performance model alone, without the cluster economics);
- :func:`search_mapping` — the best feasible mapping of each design, found by exhaustive vectorized search;
- :data:`METRICS` — every output column with its unit; :data:`MAPPING_COLUMNS`;
- :data:`MODELS` — every model module, in data-flow order; :data:`TRAINING_MODELS` — those up to the step time;
- :data:`INPUT_COLUMNS` — every column a design table may set; :data:`RENAMED_COLUMNS` — old column name ->
  new one (a table or space giving an old name is an error naming the new one);
- :class:`InputError` — bad user input, naming the row and column.

Serving (objectives/serving, docs/serving.md): :func:`evaluate_serving` — every serving metric of a table
with ``input_len`` and ``output_len`` columns (:func:`is_serving_table`); :func:`search_serving` — the same
with blank ``tp``, ``pp``, ``ep``, ``attn_dp`` searched (:data:`SERVING_MAPPING_COLUMNS`); :data:`SERVING_MODELS`;
:data:`SERVING_METRICS` (also in :data:`METRICS` where training has no metric of that name);
:data:`SERVING_INPUTS` (also in :data:`INPUT_COLUMNS`).
"""

from objectives.inputs import TRAINING_INPUT_COLUMNS
from objectives.mapping import DEFAULT_CHOICES, search_mapping
from objectives.pipeline import MAPPING_COLUMNS, MODELS, TRAINING_MODELS, evaluate, metrics
from objectives.renamed import RENAMED_COLUMNS
from objectives.serving import (
    SERVING_INPUTS,
    SERVING_MAPPING_COLUMNS,
    SERVING_METRICS,
    SERVING_MODELS,
    evaluate_serving,
    is_serving_table,
    search_serving,
)
from objectives.table import InputError

__version__ = "0.1.0"

#: the models' stages in the order data flows, each with the modules it holds (a module belongs to the first
#: entry that is its name or a package above it): a module imports from its own stage or an earlier one, never a
#: later one, and none imports this package's API but the API itself (tests/test_layout.py walks the imports).
#: The core is the design table, the model base class, the fitted factors' reader and the catalog; the
#: training model and the economics it feeds are run by the assembly (``pipeline``, ``mapping``); the fitting
#: validates and fits them offline; serving reuses all of it.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("objectives.table", "objectives.base", "objectives.calibration", "objectives.columns",
              "objectives.renamed", "objectives.ranges", "objectives.catalog")),
    ("training", ("objectives.training",)),
    ("economics", ("objectives.economics",)),
    ("assembly", ("objectives.pipeline", "objectives.reasons", "objectives.mapping", "objectives.inputs",
                  "objectives.sizing")),
    ("fitting", ("objectives.fitting",)),
    ("serving", ("objectives.serving",)),
)

#: every output column -> its unit and meaning: the training model's, then the serving model's it lacks
METRICS: dict[str, str] = metrics()
METRICS.update({name: text for name, text in SERVING_METRICS.items() if name not in METRICS})

#: every column a design table (a space) may set: the training model's (objectives/inputs.py) and the serving
#: model's
INPUT_COLUMNS: frozenset[str] = TRAINING_INPUT_COLUMNS | SERVING_INPUTS

__all__ = ["evaluate", "search_mapping", "METRICS", "INPUT_COLUMNS", "RENAMED_COLUMNS", "MAPPING_COLUMNS", "MODELS",
           "TRAINING_MODELS", "DEFAULT_CHOICES", "InputError", "__version__", "evaluate_serving", "is_serving_table",
           "SERVING_MODELS", "SERVING_METRICS", "SERVING_INPUTS", "search_serving", "SERVING_MAPPING_COLUMNS", "STAGES"]
