"""Analytical performance models of LLM training on GPU clusters, vectorized over design tables.

Public API (the engine uses only these; see docs/model-contract.md):

- :func:`evaluate` — metrics of designs with a fixed mapping;
- :func:`search_mapping` — the best feasible mapping of each design, found by exhaustive vectorized search;
- :data:`METRICS` — every output column with its unit; :data:`MAPPING_COLUMNS`;
- :class:`InputError` — bad user input, naming the row and column.
"""

from objectives.mapping import DEFAULT_CHOICES, search_mapping
from objectives.pipeline import MAPPING_COLUMNS, MODELS, evaluate, metrics
from objectives.table import InputError

__version__ = "0.1.0"

METRICS: dict[str, str] = metrics()

__all__ = ["evaluate", "search_mapping", "METRICS", "MAPPING_COLUMNS", "MODELS", "DEFAULT_CHOICES", "InputError", "__version__"]
