"""One serving instance of a design as an engine's launch command needs it: its mapping, the requests it
keeps in flight, its token budget and KV settings. An aggregated design is one instance; a disaggregated
one is a decode instance (the row's mapping) and a prefill instance (``prefill_*``, blank: the decode
instance's), each launched as its own pool (objectives/serving/disaggregated.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from dse.launch.balancer import Balancer, balancer
from dse.launch.design import Design, label, number, whole
from dse.launch.speculation import Speculation, speculation

__all__ = ["Instance", "instances", "cuda_graph_sizes"]


@dataclass
class Instance:
    role: str  # "aggregated", "decode" or "prefill"
    engine: str  # objectives.table.CATEGORIES["engine"]: trtllm, vllm, sglang, trtllm-2024
    model: str
    precision: str  # the weights' precision
    kv_precision: str
    tp: int
    pp: int
    ep: int
    attn_dp: int
    n_gpus: int
    concurrency: int | None  # requests in flight on the instance (None: the prefill pool's, which the model does not size)
    token_budget: int | None  # tokens one step processes on one attention group (max_num_tokens; None: the
    #                           prefill pool's, which the model derives from its own memory and does not store)
    kv_frac: float  # the engine's KV memory share the model used (kv_mem_frac, or the engine's default)
    max_seq_len: int  # input_len + output_len
    spec: Speculation  # speculative decoding, and latency tuning (the decode or aggregated instance's only)
    etp: int = 1  # expert tensor parallelism: each routed expert split over etp GPUs (objectives/serving/experts.py)
    balancer: Balancer = Balancer(on=False, redundant=0, experts=None)  # the expert load balancer (both pools')

    def per_group(self, total: int) -> int:
        """``total`` (requests) per attention data-parallel group, rounded up."""
        return -(-total // max(self.attn_dp, 1))

    def moe(self) -> bool:
        return self.ep > 1 or self.attn_dp > 1


def _kv_frac(row, engine: str) -> float:
    from objectives.serving.engines import ENGINE_TRAITS

    return number(row, "kv_mem_frac", ENGINE_TRAITS[engine].kv_free_frac)


def instances(design: Design) -> list[Instance]:
    """The design's instances: [aggregated], or [decode, prefill] for a disaggregated design."""
    row = design.row
    engine = label(row, "engine", "trtllm")
    disaggregated = label(row, "serving", "aggregated") == "disaggregated"
    base = dict(engine=engine, model=str(row.get("model", "model")), precision=label(row, "precision", "bf16"),
                kv_precision=label(row, "kv_precision", "bf16"), token_budget=whole(row, "token_budget", 8192),
                kv_frac=_kv_frac(row, engine),
                max_seq_len=(whole(row, "input_len", 0) or 0) + (whole(row, "output_len", 0) or 0),
                balancer=balancer(row))
    mapping = {c: whole(row, c, 1) for c in ("tp", "pp", "ep", "attn_dp")}
    spec = speculation(row)
    first = Instance(role="decode" if disaggregated else "aggregated", n_gpus=whole(row, "n_gpus", 1),
                     concurrency=whole(row, "concurrency"), spec=spec, etp=_etp(mapping, whole(row, "etp")), **mapping,
                     **base)
    if not disaggregated:
        return [first]
    prefill = {c: whole(row, f"prefill_{c}", mapping[c]) for c in mapping}
    n = whole(row, "prefill_n_gpus", first.n_gpus)
    base["token_budget"] = whole(row, "max_num_tokens")  # given: both pools'; blank: the prefill's own, unstored
    # the prefill pool speculates as the decode pool does (its first step drafts too) but runs no decode steps to
    # tune for latency; its experts over its own GPUs (objectives/serving/disaggregated.py prefill_columns)
    return [first, Instance(role="prefill", n_gpus=n, concurrency=None, spec=replace(spec, latency_tuned=False),
                            etp=_etp(prefill, None), **prefill, **base)]


def _etp(mapping: dict, given: int | None) -> int:
    """Expert tensor parallelism: the design's, else tp x attn_dp / ep (TensorRT-LLM's default,
    objectives/serving/experts.py)."""
    return given if given else max((mapping["tp"] * mapping["attn_dp"]) // max(mapping["ep"], 1), 1)


def cuda_graph_sizes(largest: int) -> list[int]:
    """Batch sizes to capture CUDA graphs for: the powers of two below ``largest``, and ``largest``."""
    sizes, b = [], 1
    while b < largest:
        sizes.append(b)
        b *= 2
    return sizes + [max(largest, 1)]
