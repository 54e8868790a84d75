"""Spaces: parse and validate a ``spaces/*.yaml`` file into a :class:`Spec` before any work starts.

A space declares the workload, the cluster dimensions to search, the mapping, the objectives, the
constraints and the search settings::

    name: gpt3-175b-gpus                 # optional, defaults to the file name
    description: GPT-3 175B on 300B tokens across four GPU generations
    workload:                            # fixed columns; ``model`` is a catalog id, an alias or a config.json
                                         #   (dse.spec.model_source), the rest overrides
      model: gpt3-175b
      train_tokens: 300e9
      global_batch: 1536
    cluster:                             # any design-table column: a list, a range or a fixed value
      gpu: [a100-sxm-80gb, h100-sxm]     #   a list of choices (catalog ids are checked)
      n_gpus: {min: 1024, max: 16384, scale: pow2}   # a range: scale linear|log|pow2, optional step, type
      gpu_hbm_tbyte_s: {min: 3.35, max: 8.0}         # a catalog field: a what-if override
      network: ib-ndr-400                # a fixed value
      instance: [owned, aws-p5.48xlarge] # rent a cloud instance (its GPU, fabric, price) or own (the row's gpu)
      pricing: [on_demand, reserved_3y]  # the rented designs' price kind (on_demand, reserved_1y/3y, spot)
    mapping: auto                        # or {tp: [1, 2, 4, 8], recompute: [selective]} (restricted lists)
    objectives:                          # one to three metric columns
      - {metric: time_to_train_days, direction: min}
      - run_cost_usd: min
    constraints: ["facility_power_peak_mw <= 30", "n_gpus <= 16384"]   # any metric or input column
    search: {sampler: nsga2, trials: 4096, batch_size: 512, seed: 0}   # nsga2 | tpe | random | grid
    prices: my-quotes.yaml               # optional: your own prices per GPU-hour (dse.spec.prices)
    facility_mw: 100                     # optional: the facility's power, MW; rack_kw_max: its rack limit, kW
                                         #   (dse.spec.facility: n_gpus then bounded by the power, or left out)

A mapping column may also be listed under ``cluster``: it is then searched by the outer level (Optuna)
instead of enumerated per design.

:func:`load_spec` reads the file (safe YAML), :func:`parse_spec` validates a mapping. Every mistake is a
:class:`dse.errors.UserError` whose ``where`` is ``<file>: <key path>`` and whose message says what is
valid; the CLI prints it as one line and exits 2. Validation needs the model's vocabulary (columns,
metrics, catalog ids): :meth:`Vocabulary.from_objectives` reads it from the ``objectives`` package, and
tests may pass their own.
"""

from dse.spec.parse import load_spec, parse_spec
from dse.spec.schema import SAMPLERS, Constraint, Dimension, Objective, SearchSettings, Spec
from dse.spec.vocabulary import Vocabulary

__all__ = [
    "Vocabulary",
    "Dimension",
    "Objective",
    "Constraint",
    "SearchSettings",
    "Spec",
    "SAMPLERS",
    "load_spec",
    "parse_spec",
]
