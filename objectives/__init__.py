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

from objectives import catalog as _catalog
from objectives.mapping import DEFAULT_CHOICES, search_mapping
from objectives.pipeline import DEFAULTS, MAPPING_COLUMNS, MODELS, REQUIRED, TRAINING_MODELS, evaluate, metrics
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
from objectives.table import CATEGORIES, InputError

__version__ = "0.1.0"

#: every output column -> its unit and meaning: the training model's, then the serving model's it lacks
METRICS: dict[str, str] = metrics()
METRICS.update({name: text for name, text in SERVING_METRICS.items() if name not in METRICS})

#: every column a design table (a space) may set: required and defaulted columns, every catalog field
#: (an override of the catalog id's value), the mapping, the categorical columns and the catalog ids
INPUT_COLUMNS: frozenset[str] = frozenset(
    set(REQUIRED) | set(DEFAULTS) | set(_catalog.GPU_FIELDS) | set(_catalog.MODEL_FIELDS)
    | set(_catalog.NETWORK_FIELDS) | set(_catalog.STORAGE_FIELDS) | set(MAPPING_COLUMNS) | set(CATEGORIES)
    | {"model", "gpu", "network", "storage", "n_gpus", "global_batch", "train_tokens", "d_head"} | SERVING_INPUTS
)

__all__ = ["evaluate", "search_mapping", "METRICS", "INPUT_COLUMNS", "RENAMED_COLUMNS", "MAPPING_COLUMNS", "MODELS",
           "TRAINING_MODELS", "DEFAULT_CHOICES", "InputError", "__version__", "evaluate_serving", "is_serving_table",
           "SERVING_MODELS", "SERVING_METRICS", "SERVING_INPUTS", "search_serving", "SERVING_MAPPING_COLUMNS"]
