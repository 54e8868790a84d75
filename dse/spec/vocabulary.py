"""What a space may name: the model's columns, metrics and catalog ids (:class:`Vocabulary`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Vocabulary"]


@dataclass(frozen=True)
class Vocabulary:
    """What a space may name: design-table input columns, metric columns, catalog ids and labels.

    Built once per validation, from the ``objectives`` package (:meth:`from_objectives`) or by tests.
    """

    input_columns: frozenset[str]
    metrics: Mapping[str, str]
    mapping_columns: tuple[str, ...]
    catalog_ids: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    labels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    integer_columns: frozenset[str] = frozenset()
    #: column -> {id taken out of the catalog: what to use instead}
    removed_ids: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: column renamed for its unit -> what to say ("was renamed 'nic_gbyte_s' (GB/s)")
    renamed_columns: Mapping[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ("gpu", "n_gpus", "global_batch")
    #: what a serving space (one whose workload or cluster gives input_len and output_len) must give instead
    serving_required: tuple[str, ...] = ("gpu", "n_gpus")

    def is_text(self, column: str) -> bool:
        """True for a column whose values are names (a catalog id or a label), not numbers."""
        return column in self.catalog_ids or column in self.labels

    @classmethod
    def from_objectives(cls) -> Vocabulary:
        """The vocabulary of the installed ``objectives`` package (called once per :func:`load_spec`)."""
        import objectives
        from objectives import catalog, pipeline
        from objectives.catalog.model_names import aliases
        from objectives.renamed import renamed_note
        from objectives.table import CATEGORIES

        inputs = getattr(objectives, "INPUT_COLUMNS", None)
        if inputs is None:
            inputs = (
                set(pipeline.REQUIRED) | set(pipeline.DEFAULTS) | set(catalog.GPU_FIELDS) | set(catalog.MODEL_FIELDS)
                | set(objectives.MAPPING_COLUMNS) | set(CATEGORIES)
                | {"model", "gpu", "n_gpus", "global_batch", "train_tokens", "d_head", "network", "storage"}
            )
        ids: dict[str, tuple[str, ...]] = {"gpu": tuple(catalog.gpu_ids()),
                                           "model": tuple(catalog.model_ids()) + tuple(aliases())}
        ids["prefill_gpu"] = ids["gpu"]  # a serving design's prefill pool GPU (objectives/serving/prefill_pool.py)
        for name in ("network", "storage"):
            getter = getattr(catalog, f"{name}_ids", None)
            if getter is not None:
                ids[name] = tuple(getter())
        return cls(
            input_columns=frozenset(inputs),
            metrics=dict(objectives.METRICS),
            mapping_columns=tuple(dict.fromkeys(tuple(objectives.MAPPING_COLUMNS)
                                                + tuple(getattr(objectives, "SERVING_MAPPING_COLUMNS", ())))),
            catalog_ids=ids,
            labels={k: tuple(v) for k, v in CATEGORIES.items()},
            integer_columns=frozenset(getattr(pipeline, "INTEGER_COLUMNS", ())) | {"zero_stage", "sequence_parallel"},
            removed_ids=dict(getattr(catalog, "REMOVED", {})),
            renamed_columns={old: renamed_note(old) for old in objectives.RENAMED_COLUMNS},
        )
