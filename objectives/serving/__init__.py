"""LLM serving on a GPU cluster: throughput at a latency target and cost per output token, vectorized.

The serving counterpart of the training model (docs/serving.md): a design table with ``input_len`` and
``output_len`` columns describes model instances serving requests of that shape; the modules
(objectives.serving.memory, .step, .batching, .economics, .reasons) give each row's KV capacity, step
times, time to first token, time per output token, output tokens per second per GPU and cost per million
output tokens, for the engine it names (objectives.serving.engines).

Public API (re-exported by :mod:`objectives`): :func:`evaluate_serving`, :func:`search_serving` (blank
``tp``, ``pp``, ``ep``, ``attn_dp`` searched), :data:`SERVING_MODELS`,
:data:`SERVING_METRICS`, :data:`SERVING_INPUTS`, :func:`is_serving_table`.
"""

from objectives.serving.engines import ENGINES, ServingCalibration
from objectives.serving.evaluate import SERVING_METRICS, SERVING_MODELS, SERVING_PERFORMANCE_MODELS, evaluate_serving
from objectives.serving.prepare import SERVING_INPUTS, is_serving_table
from objectives.serving.search import SERVING_CHOICES, SERVING_MAPPING_COLUMNS, search_serving

__all__ = ["evaluate_serving", "search_serving", "SERVING_CHOICES", "SERVING_MAPPING_COLUMNS", "SERVING_MODELS",
           "SERVING_PERFORMANCE_MODELS", "SERVING_METRICS", "SERVING_INPUTS",
           "is_serving_table", "ServingCalibration", "ENGINES"]
