"""How a mapping lays the job out on the GPUs: derived degrees, micro-batches and divisibility.

Megatron-LM orders its process groups tp (innermost, fastest varying), cp, dp, pp (outermost); experts are
carved out of the dp x cp ranks (Narayanan et al., SC'21, Sec. 3; Megatron-Core parallel_state). A mapping
is valid when every degree divides what it splits (layers excepted: a stage holds ceil(L / (pp*vp)) * vp
layers, as Megatron's uneven first and last stages allow); each broken rule adds 1 to ``con_layout``.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model

__all__ = ["Layout", "divides"]


def divides(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """True where a > 0 divides b exactly (float columns holding integers)."""
    return _whole(a, b / a)


def _whole(a: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``divides`` given the quotient q = b / a already computed."""
    return (a > 0) & (q == np.floor(q))


class Layout(Model):
    requires = (
        "n_gpus", "tp", "pp", "cp", "ep", "vp", "micro_batch", "global_batch",
        "n_layers", "n_heads", "n_kv_heads", "moe_experts", "seq_len",
    )
    provides = {
        "dp": "count; data-parallel degree n_gpus / (tp*pp*cp)",
        "layers_per_stage": "count; layers on the busiest pipeline stage, ceil(L / (pp*vp)) * vp",
        "etp": "count; expert tensor parallelism: tp while ep fits in dp*cp, else 1 (MoE parallel folding)",
        "n_microbatches": "count; micro-batches per pipeline per step, global_batch / (dp*micro_batch)",
        "con_layout": "count; broken divisibility rules (<= 0 valid)",
    }

    def compute(self, c, cal):
        model_parallel = c["tp"] * c["pp"] * c["cp"]
        dp = c["n_gpus"] / model_parallel
        dp_mb = dp * c["micro_batch"]
        m = c["global_batch"] / dp_mb
        moe = c["moe_experts"] > 0
        pp_vp = c["pp"] * c["vp"]
        dp_cp = dp * c["cp"]
        rules = (
            _whole(model_parallel, dp),  # model_parallel divides n_gpus
            _whole(dp_mb, m),  # dp*micro_batch divides global_batch
            pp_vp <= c["n_layers"],
            divides(c["tp"], c["n_heads"]),
            divides(c["tp"], c["n_kv_heads"]) | divides(c["n_kv_heads"], c["tp"]),
            divides(2.0 * c["cp"], c["seq_len"]),  # context parallelism splits s into 2*cp chunks
            (c["vp"] == 1) | (c["pp"] > 1),  # interleaving needs a pipeline
            # experts: ep splits moe_experts and is carved out of dp*cp, or of tp*dp*cp with expert tensor
            # parallelism 1 (Megatron-Core MoE parallel folding); dense models need ep = 1
            np.where(moe, divides(c["ep"], c["moe_experts"]) & divides(c["ep"], dp_cp * c["tp"]), c["ep"] == 1)
            if moe.any() else c["ep"] == 1,
        )
        broken = np.zeros(np.broadcast_shapes(*(ok.shape for ok in rules)), dtype=np.uint8)
        for ok in rules:  # a handful of rules, each over whole columns (counted in bytes, then as floats)
            broken += ~ok
        # Megatron lets the first and last stages hold fewer layers; the busiest stage sets the pace
        layers = np.ceil(c["n_layers"] / pp_vp) * c["vp"]
        # expert tensor parallelism: experts keep tp while ep fits in dp*cp, else ep spans tp and experts are whole
        etp = np.where(divides(c["ep"], dp_cp), c["tp"], 1.0)
        return {"dp": dp, "layers_per_stage": layers, "etp": etp, "n_microbatches": m,
                "con_layout": broken.astype(np.float64)}
