"""How a mapping lays the job out on the GPUs: derived degrees, micro-batches, the pipeline split, validity.

Megatron-LM orders its process groups tp (innermost, fastest varying), cp, dp, pp (outermost); experts are
carved out of the dp x cp ranks (Narayanan et al., SC'21, Sec. 3; Megatron-Core parallel_state). Layers
are placed by the most balanced pipeline split the stack accepts (:func:`objectives.divisibility.pipeline_split`).
The rules a mapping must pass live in :mod:`objectives.divisibility`; each broken one adds 1 to
``con_layout`` and ``layout_rule`` names the first (its code; 0 where none is broken).
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model
from objectives.divisibility import Job, broken_rules, divides

__all__ = ["Layout", "divides"]


class Layout(Model):
    requires = (
        "n_gpus", "tp", "pp", "cp", "ep", "vp", "micro_batch", "global_batch",
        "n_layers", "n_heads", "n_kv_heads", "moe_experts", "seq_len", "stack", "pp_first_layers", "pp_last_layers",
    )
    provides = {
        "dp": "count; data-parallel degree n_gpus / (tp*pp*cp)",
        "layers_per_stage": "count; decoder layers on the busiest pipeline stage (all its vp chunks)",
        "layers_first_stage": "count; decoder layers on the first pipeline stage (which also holds the embedding)",
        "layers_last_stage": "count; decoder layers on the last pipeline stage (which also holds the output layer and loss)",
        "etp": "count; expert tensor parallelism: tp while ep fits in dp*cp, else 1 (MoE parallel folding)",
        "n_microbatches": "count; micro-batches per pipeline per step, global_batch / (dp*micro_batch)",
        "con_layout": "count; broken divisibility and schedule rules (<= 0 valid; objectives/divisibility.py)",
        "layout_rule": "code; the first broken rule (objectives.divisibility.RULES; 0 none)",
    }

    def compute(self, c, cal):
        job = Job(c)
        count, first = broken_rules(job)
        split = job.split
        # expert tensor parallelism: experts keep tp while ep fits in dp*cp, else ep spans tp and experts are whole
        etp = np.where(divides(c["ep"], job.dp * c["cp"]), c["tp"], 1.0)
        return {"dp": job.dp, "layers_per_stage": split.busiest, "layers_first_stage": split.first,
                "layers_last_stage": split.last, "etp": etp, "n_microbatches": job.n_microbatches,
                "con_layout": count, "layout_rule": first}
