"""Every column a training design table may set: required and defaulted columns, every catalog field (an
override of the catalog id's value), the mapping, the categorical columns and the catalog ids. The package's
``objectives.INPUT_COLUMNS`` adds the serving model's inputs to these."""

from __future__ import annotations

from objectives import catalog
from objectives.pipeline import DEFAULTS, MAPPING_COLUMNS, REQUIRED
from objectives.table import CATEGORIES

__all__ = ["TRAINING_INPUT_COLUMNS"]

TRAINING_INPUT_COLUMNS: frozenset[str] = frozenset(
    set(REQUIRED) | set(DEFAULTS) | set(catalog.GPU_FIELDS) | set(catalog.MODEL_FIELDS) | set(catalog.NETWORK_FIELDS)
    | set(catalog.STORAGE_FIELDS) | set(MAPPING_COLUMNS) | set(CATEGORIES)
    | {"model", "gpu", "network", "storage", "n_gpus", "global_batch", "train_tokens", "d_head"}
)
