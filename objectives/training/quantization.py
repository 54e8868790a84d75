"""What low-precision training pays beside its GEMMs: the quantization recipes' HBM traffic.

A GEMM in fp8 or fp4 reads operands that a quantize kernel wrote from the 16-bit tensor: a row-wise copy for
the forward and the data-gradient GEMM and a column-wise one for the weight-gradient GEMM, which reads the
operand transposed (NVIDIA Transformer Engine, the ``rowwise``/``columnwise`` usages of its quantizers). The
recipes differ in how the scale is found and stored and in whether one copy serves both (Transformer Engine
docs, ``features/low_precision_training``: fp8_delayed_scaling, fp8_current_scaling, fp8_blockwise_scaling,
mxfp8, nvfp4, and ``performance_considerations``; source ``pytorch/csrc/quantizer.cpp``; OCP Microscaling
Formats v1.0, 2023):

- ``tensor_delayed`` (``DelayedScaling``): one scale per tensor from the amax history; the amax of the
  current tensor is recorded during the cast. Read 2 B, write 1 B; Hopper's fp8 tensor cores take only
  K-major operands, so a transposed copy is written too (1 B); Blackwell's read one copy either way.
- ``tensor_current`` (``Float8CurrentScaling``): one scale per tensor from this tensor's own amax, which a
  separate reduction kernel finds before the cast ("requires reading the tensor twice"): one more read, 2 B.
- ``blockwise`` (``Float8BlockScaling``, DeepSeek-V3's recipe): a scale per 1x128 block of activations and
  gradients (fp32, 4 B per 128 elements), row-wise and column-wise copies both quantized from the 16-bit
  input in one fused pass.
- ``mxfp8`` (``MXFP8BlockScaling``, OCP MX): an E8M0 scale (1 B) per 32 elements; the row-wise (1x32) and
  column-wise (32x1) copies differ numerically, so both are written from the input, in one pass. Blackwell's
  block-scaled tensor cores read the scales; Hopper has none.
- NVFP4 (``NVFP4BlockScaling``; NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv 2509.25149,
  Sec. 4): 4-bit elements (0.5 B) with an E4M3 scale per 16 and a per-tensor fp32 scale. One pass
  (``nvte_hadamard_transform_amax``) reads the tensor for the row-wise amax and the amax after the 16x16
  random Hadamard transform that the column-wise (weight-gradient) copy gets; a second
  (``nvte_quantize_with_hadamard_transform``) reads it again and writes both 4-bit copies with their scales.
  Gradients are rounded stochastically inside that kernel. Attention, the output layer and norms stay in
  bf16; Megatron-Bridge's NVFP4 recipes keep no decoder layer in bf16 (``first_last_layers_bf16`` left
  False; Megatron-Bridge ``training/mixed_precision.py`` ``bf16_with_nvfp4_mixed``).

Weights are quantized once per optimizer step and cached across the step's micro-batches (Transformer
Engine's ``is_first_microbatch``); the model charges them per micro-batch (objectives.training.compute), an upper
bound of a few tenths of a percent. A stack that keeps its weights in low precision
(``low_precision_params``: Megatron-Bridge's ``fp8_param_gather`` with delayed, current and MX scaling,
``fp4_param_gather`` with NVFP4; not with blockwise scaling) writes them so in the optimizer step, quantizes
none per micro-batch, holds them in HBM at that size and all-gathers them so (ZeRO / FSDP): 1 B per weight in
fp8 (and the transposed copy on Hopper), an MX copy's 1 + 1/32 B, NVFP4's 0.5 + 1/16 B.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FP8_RECIPES", "CAST_BYTES", "WEIGHT_CAST_BYTES", "NVFP4_CAST_BYTES", "NVFP4_WEIGHT_CAST_BYTES", "TRANSPOSE_BYTES",
           "cast_bytes", "weight_cast_bytes", "default_fp8_recipe", "block_scaled", "low_precision_weights",
           "param_bytes", "WEIGHT_BYTES_16", "PARAM_BYTES_FP8", "PARAM_BYTES_FP4"]

#: the fp8 recipes, in the order of their codes in the design table (objectives.table CATEGORIES)
FP8_RECIPES = ("tensor_delayed", "tensor_current", "blockwise", "mxfp8")
#: HBM bytes per element of an activation or gradient quantized to fp8, by recipe (module doc), on a GPU whose
#: fp8 tensor cores read one per-tensor copy either way (Blackwell): delayed 2 + 1; current one more read of 2;
#: blockwise 2 + 2 x (1 + 4/128); mxfp8 2 + 2 x (1 + 1/32)
CAST_BYTES = np.array([3.0, 5.0, 2.0 + 2.0 * (1.0 + 4.0 / 128.0), 2.0 + 2.0 * (1.0 + 1.0 / 32.0)])
#: what a per-tensor recipe adds where the tensor cores take K-major fp8 operands only (Hopper, Ada): the
#: transposed copy, 1 B
TRANSPOSE_BYTES = 1.0
#: the same per weight element: per-tensor and 128x128-block scales (a transposed tile keeps its scale) one
#: copy, 2 + 1 (+ the transpose on Hopper; current scaling's amax read 2); MX's 1x32 blocks two copies
WEIGHT_CAST_BYTES = np.array([3.0, 5.0, 3.0 + 4.0 / (128.0 * 128.0), 2.0 + 2.0 * (1.0 + 1.0 / 32.0)])
#: NVFP4 per activation or gradient element: the amax pass (read 2), the quantize pass (read 2, write two 4-bit
#: copies with an E4M3 scale per 16: 2 x (0.5 + 1/16))
NVFP4_CAST_BYTES = 2.0 + 2.0 + 2.0 * (0.5 + 1.0 / 16.0)
#: NVFP4 per weight element: amax (2), then read 2 and write one copy with 16x16 block scales (2D scaling,
#: transpose-invariant; arXiv 2509.25149 Sec. 4.3): 0.5 + 1/256
NVFP4_WEIGHT_CAST_BYTES = 2.0 + 2.0 + 0.5 + 1.0 / 256.0


#: bytes of a 16-bit weight as held and gathered
WEIGHT_BYTES_16 = 2.0
#: an fp8 weight held and gathered by a low-precision-params stack, by recipe (module doc): per tensor 1 B, a
#: blockwise run keeps bf16 weights (fp8_param_gather off), MX the row-wise copy with its scales
PARAM_BYTES_FP8 = np.array([1.0, 1.0, WEIGHT_BYTES_16, 1.0 + 1.0 / 32.0])
#: an NVFP4 weight: 4 bits and an E4M3 scale per 16
PARAM_BYTES_FP4 = 0.5 + 1.0 / 16.0


def _fp8_bytes(by_recipe: np.ndarray, recipe: np.ndarray, gpu_fp4_tflop_s: np.ndarray) -> np.ndarray:
    """The bytes of ``by_recipe`` (one per FP8_RECIPES code; ``recipe`` filled by objectives.pipeline.prepare),
    plus the transposed per-tensor copy where the GPU's fp8 tensor cores need it (not block-scaled: Hopper)."""
    code = np.clip(recipe, 0, len(FP8_RECIPES) - 1).astype(np.intp)
    return by_recipe[code] + np.where((code <= 1) & ~block_scaled(gpu_fp4_tflop_s), TRANSPOSE_BYTES, 0.0)


def low_precision_weights(precision: np.ndarray, recipe: np.ndarray, stack_keeps: np.ndarray) -> np.ndarray:
    """True where the stack keeps the run's weights in fp8 or fp4 (not blockwise fp8): no per-micro-batch
    weight quantization, smaller weights in HBM and on the wire (module doc)."""
    return (stack_keeps > 0) & ((precision == 2) | ((precision == 1) & (recipe != 2)))


def param_bytes(precision: np.ndarray, recipe: np.ndarray, stack_keeps: np.ndarray,
                gpu_fp4_tflop_s: np.ndarray) -> np.ndarray:
    """Bytes per weight as held in HBM and all-gathered: 16-bit, or the low-precision copy where the stack
    keeps one (with the transposed per-tensor copy on a GPU whose fp8 tensor cores need it)."""
    low = np.where(precision == 2, PARAM_BYTES_FP4, _fp8_bytes(PARAM_BYTES_FP8, recipe, gpu_fp4_tflop_s))
    return np.where(low_precision_weights(precision, recipe, stack_keeps), low, WEIGHT_BYTES_16)


def default_fp8_recipe(gpu_fp4_tflop_s: np.ndarray) -> np.ndarray:
    """The recipe a blank ``fp8_recipe`` means, by GPU: MXFP8 where the tensor cores scale blocks (the GPUs
    with fp4, Blackwell and MI355X), else per-tensor current scaling (Megatron-Bridge's recipes: ``fp8_mx`` on
    Blackwell, ``fp8_cs`` on Hopper)."""
    return np.where(block_scaled(gpu_fp4_tflop_s), 3.0, 1.0)


def block_scaled(gpu_fp4_tflop_s: np.ndarray) -> np.ndarray:
    """True where the GPU's tensor cores read block scales (MX formats): the GPUs with fp4."""
    return gpu_fp4_tflop_s > 0  # NaN (no fp4) compares False


def cast_bytes(precision: np.ndarray, recipe: np.ndarray, gpu_fp4_tflop_s: np.ndarray) -> np.ndarray:
    """HBM bytes per quantized activation or gradient element: 0 in bf16, by recipe in fp8 (a per-tensor
    recipe's transposed copy where the GPU's tensor cores need it), NVFP4's in fp4."""
    fp8 = _fp8_bytes(CAST_BYTES, recipe, gpu_fp4_tflop_s)
    return np.select([precision == 1, precision == 2], [fp8, NVFP4_CAST_BYTES], 0.0)


def weight_cast_bytes(precision: np.ndarray, recipe: np.ndarray, gpu_fp4_tflop_s: np.ndarray) -> np.ndarray:
    """HBM bytes per weight element quantized: 0 in bf16, by recipe in fp8, NVFP4's in fp4."""
    fp8 = _fp8_bytes(WEIGHT_CAST_BYTES, recipe, gpu_fp4_tflop_s)
    return np.select([precision == 1, precision == 2], [fp8, NVFP4_WEIGHT_CAST_BYTES], 0.0)
