"""PyTorch FSDP's gradient path through HBM: what its post-backward hook streams per weight per micro-batch.

PyTorch FSDP (FlatParameter; MosaicML llm-foundry ran it through Composer in 2023 with bf16 parameters and
fp32 gradient reduction) reduce-scatters each FSDP unit's gradient in every micro-batch's backward
(objectives.training.communication). Beside that collective, whose HBM and SM contention with compute is
``communication.OVERLAP_SLOWDOWN``, three memory-bound kernels read and write every weight's gradient of the
unit (pytorch/pytorch@00ae0bc9 ``torch/distributed/fsdp/_runtime_utils.py`` ``_post_backward_hook``;
``_flat_param.py`` ``FlatParamHandle._use_unsharded_views``; ``torch/distributed/algorithms/_comm_hooks/
default_hooks.py`` ``reduce_scatter_hook`` and ``DefaultState._get_gradient_predivide_factor``):

- the unit's parameters are views (split, then view) of the unsharded flat parameter, so autograd gathers
  their 16-bit gradients into one flat gradient (split's backward, a concatenation): read 2 B, write 2 B;
- ``flat_param.grad.to(reduce_dtype)`` casts it to the reduce dtype where that differs from the 16-bit
  parameters: read 2 B, write 4 B for fp32;
- the default reduce-scatter hook divides it in place by the gradient pre-divide factor before the
  collective (``grad.div_``; the factor is 2 or more for every world size above 1): read and write the
  reduce dtype's bytes.

So 4 + 6 + 8 = 18 bytes per weight per micro-batch with fp32 reduction. What touches only the shard (the
post-divide, the accumulation into ``_saved_grad_shard``, the fp32 shard cast to bf16 before a gather) is 1/dp
of it and left out, and so is the padding copy that only a flat parameter not divisible by the world size
makes. The kernels run on FSDP's post-backward stream beside the backward's GEMMs and take the SMs they hold
from them; objectives.training.compute adds their HBM time to the backward, as it adds the element-wise
kernels'. Megatron-Core accumulates into its gradient buffer inside the weight-gradient GEMM
(gradient_accumulation_fusion) and reduces once per step: no such kernels, 0 bytes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GRAD_BYTES_16", "grad_path_bytes"]

#: bytes of a 16-bit gradient element, as autograd writes it for bf16 parameters
GRAD_BYTES_16 = 2.0


def grad_path_bytes(fp32_shards, grad_bytes):
    """HBM bytes per weight per micro-batch of PyTorch FSDP's gradient path (module doc), by stack: the
    concatenation (2 + 2), the cast to the reduce dtype of ``grad_bytes`` where it is not 16-bit (2 + grad_bytes)
    and the in-place pre-division (2 x grad_bytes); 0 for stacks that are not PyTorch FSDP (``fp32_shards`` 0)."""
    fp32_shards = np.asarray(fp32_shards, dtype=np.float64)
    grad_bytes = np.asarray(grad_bytes, dtype=np.float64)
    cast = np.where(grad_bytes != GRAD_BYTES_16, GRAD_BYTES_16 + grad_bytes, 0.0)
    return np.where(fp32_shards > 0, 2.0 * GRAD_BYTES_16 + cast + 2.0 * grad_bytes, 0.0)
