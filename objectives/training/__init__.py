"""The training performance model: one module per concept, in the order the pipeline runs them
(objectives/pipeline.py ``MODELS``).

- ``transformer``: parameter counts and model FLOPs per token;
- ``divisibility`` and ``layout``: which mappings Megatron runs, and how one lays the job out;
- ``topology`` and ``collectives``: the network a cluster has, and what a collective costs on it;
- ``quantization``: the low-precision recipes' traffic beside their GEMMs;
- ``compute``, ``communication``, ``memory``: one micro-batch's compute, its exposed communication, the fit
  in HBM; ``fsdp_grads``: PyTorch FSDP's gradient path through HBM (compute reads it);
- ``steptime``: the pieces on one critical path: step time, throughput, MFU;
- ``checkpoint``, ``preemption``, ``reliability``: checkpoints, interruptions and goodput;
- ``intervals``: the 80% interval on every figure, from the held-out residuals.

Each module is a :class:`objectives.base.Model` or helpers for one: columns in, new columns out.
"""
