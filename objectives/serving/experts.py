"""How a serving instance lays out its routed experts: expert parallelism ``ep`` and expert tensor parallelism
``etp`` over the tp x attn_dp GPUs of a pipeline stage.

The stage's g = tp x attn_dp GPUs form ep x etp for the MoE layers (TensorRT-LLM ``Mapping``:
``tp_size must equal to moe_tp_size * moe_ep_size * moe_cluster_size``, tensorrt_llm/mapping.py @05ebebb2,
with the LLM API's ``moe_tensor_parallel_size`` and ``moe_expert_parallel_size``; SGLang's ``--ep-size``
inside ``--tp-size`` likewise, each expert split over the ``moe_tp_size`` = tp_size / ep_size ranks of its
group, fused_moe_triton/layer.py): each of the ep ranks holds E / ep experts, each expert's weights split
over etp GPUs (its gate/up columns and down rows, as Megatron splits a dense MLP; Megatron-Core
``expert_tensor_parallel_size``). So per GPU

    expert weight bytes = bytes x MoE layers x expert parameters per layer / (ep x etp)     (= / g)
    expert FLOPs        = 2 x topk x expert parameters / E / (ep x etp) per routed token    (= / g)

and every expert GEMM is d_ff / etp wide (the fill of its narrow dimension, objectives/serving/step.py).
``etp`` blank is g / ep, TensorRT-LLM's default (``moe_tp_size = tp_size // moe_ep_size`` where only the
EP size is given, mapping.py): every row without an ``etp`` is laid out as the serving model always laid
it out (step.py's ``expert_split``), its values unchanged.

The expert outputs' partial sums (etp slices of each expert, and the experts of different ranks) are
summed where the layer already sums: in the tensor-parallel all-reduce after the feed-forward on a
tensor-parallel instance (SGLang fused_moe_triton/layer.py: ``if self.reduce_results and (self.moe_tp_size
> 1 or self.moe_ep_size > 1): tensor_model_parallel_all_reduce``), and in the reduce-scatter over the
stage under attention data parallelism (step.py, the engines' all-gather / reduce-scatter MoE path). Only
the all-to-all path (``moe_all_to_all`` 1: DeepEP, TensorRT-LLM's all-to-all kernels) changes with etp: it
runs over the ep ranks of an expert group, and each dispatched copy is then all-gathered over the etp
ranks that hold the slices of its expert and each slice's output reduce-scattered back before the combine
(Megatron-Core ``MoEAlltoAllTokenDispatcher``: all-to-all over the EP group, all-gather-v over the expert
tensor-parallel group; the reverse on the way back): :func:`expert_all_to_all`. TensorRT-LLM enables its
all-to-all only with attention DP and more EP ranks than the top-k (``select_alltoall_method_type``:
``moe_ep_size <= top_k`` -> NotEnabled); such a row is priced as given, not refused.

Layout rules: a given etp is a whole number >= 1 that divides tp x attn_dp and the experts' hidden size
(``d_ff``), on an MoE model (objectives/serving/prepare.py, one-line input errors); ep x etp = tp x attn_dp
is the mapping's (ep may be searched): ``con_layout`` where not (:func:`expert_layout_bad`).
"""

from __future__ import annotations

import numpy as np

from objectives.serving.balance import expert_slots
from objectives.training.collectives import all_to_all_terms, reduce_scatter_terms

__all__ = ["expert_tp", "expert_layout_bad", "expert_all_to_all", "expert_weight_bytes_per_gpu"]


def expert_tp(c) -> np.ndarray:
    """Each row's expert tensor parallelism: ``etp`` where given, else g / ep (at least 1), TensorRT-LLM's
    default (module doc)."""
    derived = np.maximum(c["tp"] * c["attn_dp"] / c["ep"], 1.0)
    etp = c.get("etp") if hasattr(c, "get") else None
    if etp is None:
        return derived
    return np.where(np.isnan(etp), derived, etp)


def expert_layout_bad(c) -> np.ndarray:
    """True where a given etp and the row's ep do not make the stage's GPUs: ep x etp != tp x attn_dp
    (TensorRT-LLM mapping.py's check); a blank etp is g / ep and never is."""
    etp = c.get("etp") if hasattr(c, "get") else None
    if etp is None:
        return np.zeros(np.shape(c["tp"]), dtype=bool)
    return ~np.isnan(etp) & (c["ep"] * etp != c["tp"] * c["attn_dp"])


def expert_weight_bytes_per_gpu(c, bytes_per_weight, moe_layers) -> np.ndarray:
    """Routed-expert weight bytes on one GPU of the stage: ``moe_layers`` layers' expert slots over ep x etp
    (module doc; a balancer's redundant copies included, objectives/serving/balance.py)."""
    slots = expert_slots(c) / np.maximum(c["moe_experts"], 1.0)
    return bytes_per_weight * moe_layers * c["params_expert_layer"] * slots / (c["ep"] * expert_tp(c))


def expert_all_to_all(linear, a2a_row, ep, etp, used, latency_s):
    """(seconds at 0 bytes, seconds per token of the group) of one all-to-all MoE call (a dispatch or a
    combine, ``a2a_row`` bytes a token: step.py) with expert tensor parallelism ``etp``: the all-to-all over
    the ``ep`` ranks of an expert group (consecutive ranks, stride 1: TensorRT-LLM's moe_ep groups), and
    where etp > 1 an all-gather (dispatch) or reduce-scatter (combine) over the etp ranks of each expert
    (stride ep: mapping.py's moe_tp groups) of the etp copies a GPU then holds, ``etp x a2a_row`` bytes a
    token, one more collective of ``latency_s`` (module doc). ``linear``: step.py's split of a collective
    into its time at 0 bytes and per token. At etp 1 (ep = tp x attn_dp) the all-to-all of before exactly."""
    a2a0, a2a1 = linear(all_to_all_terms, a2a_row, ep, 1.0, used)
    split = etp > 1.0
    if not np.any(split & (np.asarray(used) > 0)):
        return a2a0, a2a1
    rs0, rs1 = linear(reduce_scatter_terms, etp * a2a_row, etp, ep, used * split)
    return a2a0 + split * (latency_s + rs0), a2a1 + split * rs1
