"""The serving model's per-design parts (objectives/serving/designs.py) give every output bit for bit as the
row-by-row model does, and run per design only where every column they read takes one value per design."""

import numpy as np

from objectives.serving.batching import ServingBatching
from objectives.serving.designs import design_codes, design_needs, design_parts
from objectives.serving.engines import ServingCalibration
from objectives.serving.evaluate import SERVING_MODELS, run_serving
from objectives.serving.prepare import prepare_serving

#: dense, MoE (shared experts, many small experts), MLA and sliding-window models
MODELS = ["llama3-8b", "llama3-70b", "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "gpt-oss-20b"]
GPUS = ["h100-sxm", "h200-sxm", "b200", "gb200"]
BATCHING = SERVING_MODELS.index(next(m for m in SERVING_MODELS if isinstance(m, ServingBatching)))


def _table(n=4000, seed=3):
    rng = np.random.default_rng(seed)
    tp, dp, pp = (rng.choice(v, n).astype(float) for v in ([1, 2, 4, 8], [1, 1, 2, 4], [1, 1, 2]))
    return {
        "model": np.array(MODELS, dtype=object)[rng.integers(0, len(MODELS), n)],
        "gpu": np.array(GPUS, dtype=object)[rng.integers(0, len(GPUS), n)],
        "tp": tp, "attn_dp": dp, "pp": pp, "ep": rng.choice([1.0, 2.0, 4.0], n), "n_gpus": tp * dp * pp,
        "precision": np.array(["bf16", "fp8", "fp4"], dtype=object)[rng.integers(0, 3, n)],
        "kv_precision": np.array(["bf16", "fp8"], dtype=object)[rng.integers(0, 2, n)],
        "engine": np.array(["trtllm", "vllm", "sglang"], dtype=object)[rng.integers(0, 3, n)],
        "input_len": rng.choice([128.0, 1000.0, 8192.0], n), "output_len": rng.choice([128.0, 2048.0], n),
        "concurrency": np.where(rng.random(n) < 0.5, np.nan, rng.choice([1.0, 32.0, 256.0], n)),
    }


def _both(table):
    """(outputs per design, outputs row by row, the per-design parts' model indices) of a table."""
    user, floats = prepare_serving(table)
    designs = design_codes(user, floats, design_needs(SERVING_MODELS))
    parts = design_parts(floats, designs, SERVING_MODELS, ServingCalibration.load())
    return run_serving(floats, designs=designs), run_serving(floats), set(parts)


def _same_bits(a, b):
    assert a.keys() == b.keys()
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        assert x.dtype == y.dtype and x.shape == y.shape, k
        assert x.tobytes() == y.tobytes(), k  # every value, NaN included, bit for bit


def test_step_constants_per_design_are_the_row_by_row_values():
    per_design, per_row, parts = _both(_table())
    assert BATCHING in parts  # the step's constants ran once per design (scale-up, NIC, Grace by the GPU)
    _same_bits(per_design, per_row)


def test_a_per_row_override_of_a_step_column_runs_the_step_row_by_row():
    table = _table(seed=5)
    rows = len(table["tp"])
    table["scaleup_gbyte_s"] = np.where(np.arange(rows) % 3 == 0, 450.0, np.nan)  # some rows: another NVLink
    per_design, per_row, parts = _both(table)
    assert BATCHING not in parts
    _same_bits(per_design, per_row)
    table = _table(seed=6)
    table["network"] = np.array(["ib-ndr-400", None], dtype=object)[np.arange(rows) % 2]  # a fabric on some rows
    per_design, per_row, parts = _both(table)
    assert BATCHING not in parts
    _same_bits(per_design, per_row)
