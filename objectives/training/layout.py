"""How a mapping lays the job out on the GPUs: derived degrees, micro-batches, the pipeline split, validity.

Megatron-LM orders its process groups tp (innermost, fastest varying), cp, dp, pp (outermost); experts are
carved out of the dp x cp ranks (Narayanan et al., SC'21, Sec. 3; Megatron-Core parallel_state). Layers
are placed by the most balanced pipeline split the stack accepts (:func:`objectives.training.divisibility.pipeline_split`).
The rules a mapping must pass live in :mod:`objectives.training.divisibility`; each broken one adds 1 to
``con_layout`` and ``layout_rule`` names the first (its code; 0 where none is broken).

A model mixing layer kinds (MoE and dense feed-forward layers, full and windowed attention;
objectives/training/transformer.py) is costed on its *busiest* stage, for memory and compute alike: a stage of n
consecutive layers holds as many of a kind as n layers can where that kind is spread evenly over the layers
it occupies, ceil(n x count / span) (at most the model's count), the span being the layers after the
leading dense ones for MoE layers (those sit on the first stage) and all layers for full-attention ones.
Every 2nd layer MoE and 3 layers a stage: 2 MoE layers; gpt-oss's alternating windows and 9 layers a stage:
5 full-attention layers. The last stage, with the output layer and loss, is counted the same way.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model
from objectives.training.divisibility import Job, broken_rules, divides

__all__ = ["Layout", "divides", "most_per_stage"]


class Layout(Model):
    requires = (
        "n_gpus", "tp", "pp", "cp", "ep", "vp", "micro_batch", "global_batch",
        "n_layers", "n_heads", "n_kv_heads", "moe_experts", "seq_len", "stack", "pp_first_layers", "pp_last_layers",
        "n_moe_layers", "n_windowed_layers", "moe_dense_layers",
    )
    provides = {
        "dp": "count; data-parallel degree n_gpus / (tp*pp*cp)",
        "layers_per_stage": "count; decoder layers on the busiest pipeline stage (all its vp chunks)",
        "layers_first_stage": "count; decoder layers on the first pipeline stage (which also holds the embedding)",
        "layers_last_stage": "count; decoder layers on the last pipeline stage (which also holds the output layer and loss)",
        "etp": "count; expert tensor parallelism: tp while ep fits in dp*cp, else 1 (MoE parallel folding)",
        "n_microbatches": "count; micro-batches per pipeline per step, global_batch / (dp*micro_batch)",
        "moe_layers_per_stage": "count; MoE layers on the busiest pipeline stage (the most its layers can hold)",
        "moe_layers_last_stage": "count; MoE layers on the last pipeline stage",
        "full_attn_layers_per_stage": "count; full-attention (not windowed) layers on the busiest pipeline stage",
        "full_attn_layers_last_stage": "count; full-attention layers on the last pipeline stage",
        "con_layout": "count; broken divisibility and schedule rules (<= 0 valid; objectives/training/divisibility.py)",
        "layout_rule": "code; the first broken rule (objectives.training.divisibility.RULES; 0 none)",
    }

    def compute(self, c, cal):
        job = Job(c)
        count, first = broken_rules(job)
        split = job.split
        # expert tensor parallelism: experts keep tp while ep fits in dp*cp, else ep spans tp and experts are whole
        etp = np.where(divides(c["ep"], job.dp * c["cp"]), c["tp"], 1.0)
        moe_span = c["n_layers"] - np.where(c["n_moe_layers"] > 0, c["moe_dense_layers"], 0.0)
        full = c["n_layers"] - c["n_windowed_layers"]
        return {"dp": job.dp, "layers_per_stage": split.busiest, "layers_first_stage": split.first,
                "layers_last_stage": split.last, "etp": etp, "n_microbatches": job.n_microbatches,
                "moe_layers_per_stage": most_per_stage(split.busiest, c["n_moe_layers"], moe_span),
                "moe_layers_last_stage": most_per_stage(split.last, c["n_moe_layers"], moe_span),
                "full_attn_layers_per_stage": most_per_stage(split.busiest, full, c["n_layers"]),
                "full_attn_layers_last_stage": most_per_stage(split.last, full, c["n_layers"]),
                "con_layout": count, "layout_rule": first}


def most_per_stage(stage_layers, count, span) -> np.ndarray:
    """The most layers of a kind a stage of ``stage_layers`` consecutive layers holds, where ``count`` of them
    are spread evenly over ``span`` layers: ceil(n x count / span), at most count and n (module doc)."""
    n = np.asarray(stage_layers, dtype=np.float64)
    per = np.ceil(n * count / np.maximum(span, 1.0) - 1e-9)
    return np.minimum(np.minimum(per, count), n)
