"""The problem a sweep solves, in pymoo's sense: what a design is worth and what it must meet.

A space's objectives are metric columns to minimize or maximize; its constraints are ``column op bound``
rows of the space file; the model adds its own feasibility (``feasible`` and its ``con_*`` columns, <= 0
where met). :class:`Problem` turns the result table of a batch (what the scoring function returned for
its design table) into what the search is told and the store keeps (:class:`Outcome`): the objective
values, one Optuna constraint per space constraint plus :data:`MODEL_CONSTRAINT`, whether the model finds
each design feasible and whether it meets the space's constraints. An infeasible design is a row with a
positive violation, never an error.

The scoring function (:data:`ScoreFn`) is the model: by default each design's best feasible mapping from
``objectives.search_mapping`` over the space's mapping choices (:func:`default_scorer`), or for a serving
space (input_len and output_len given) from ``objectives.search_serving``. A bad input the
model rejects becomes one line naming the space file's key (:func:`model_errors`), and so does a serving
space none of whose designs can run, every engine it names on GPUs it does not support
(:func:`check_engines`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.errors import UserError
from dse.space import Space
from dse.spec import Spec

__all__ = ["Problem", "Outcome", "ScoreFn", "MODEL_CONSTRAINT", "score_with_mapping_search", "score_serving",
           "is_serving_space", "check_engines", "default_scorer", "calibration_of", "model_errors"]

#: a scoring function: design table -> result table (one row per input row)
ScoreFn = Callable[[Mapping[str, Any]], Mapping[str, np.ndarray]]

#: the Optuna constraint that carries the model's own feasibility (max of its ``con_*`` columns)
MODEL_CONSTRAINT = "model"


def score_with_mapping_search(table: Mapping[str, Any], choices: Mapping[str, Any] | None = None,
                              cal=None) -> dict[str, np.ndarray]:
    """Score designs with their best feasible mapping (``objectives.search_mapping``) under calibration ``cal``
    (None: the shipped one); runs on the actors."""
    import objectives

    return objectives.search_mapping(table, choices=dict(choices) if choices else None, cal=cal)


def calibration_of(spec: Spec):
    """The space's ``calibration:`` file as objectives.Calibration (None: the shipped calibration)."""
    if not spec.calibration:
        return None
    from objectives import InputError
    from objectives.calibration import Calibration

    try:
        return Calibration.read(spec.calibration)
    except InputError as exc:
        raise UserError(str(exc), where=f"{spec.source}: calibration") from None


def score_serving(table: Mapping[str, Any], choices: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Score serving designs with their best feasible mapping (``objectives.search_serving``); on the actors."""
    import objectives

    return objectives.search_serving(table, choices=dict(choices) if choices else None)


def is_serving_space(space: Space) -> bool:
    """A space whose designs are serving deployments: it gives input_len and output_len (docs/serving.md)."""
    given = set(space.spec.workload) | {d.name for d in space.spec.dimensions}
    return {"input_len", "output_len"} <= given


def check_engines(spec: Spec) -> None:
    """A UserError for a serving space in which no engine it names runs on any GPU its designs have (a
    rented design's GPU is its instance's): TensorRT-LLM on AMD GPUs (objectives.serving.engines.ENGINE_VENDORS),
    naming the engines, the GPUs and the engines that run on them. A space that also pairs them otherwise
    keeps those designs: the others are infeasible (``con_engine_vendor``)."""
    from objectives.catalog import instances
    from objectives.serving.engines import ENGINES, engine_gpu_text, engines_for, gpu_vendors

    def values(column: str) -> tuple[list, str]:
        if column in spec.workload:
            return [spec.workload[column]], f"workload.{column}"
        dim = next((d for d in spec.dimensions if d.name == column), None)
        return (list(dim.values), f"cluster.{column}") if dim is not None else ([], f"workload.{column}")

    engines, key = values("engine")
    default = not engines  # none given: the model's default engine (objectives/serving/prepare.py, code 0)
    engines = engines or [ENGINES[0]]
    rented = [i for i in values("instance")[0] if i != "owned"]
    gpus = [instances()[i]["gpu"] for i in rented if i in instances()]
    if len(rented) < len(values("instance")[0]) or not rented:  # owned designs: the space's own GPUs
        gpus += values("gpu")[0]
    gpus = list(dict.fromkeys(gpus))
    if not gpus or any(e in engines_for(g) for e in engines for g in gpus):
        return
    if len(engines) == 1 and len(gpus) == 1:
        message = engine_gpu_text(engines[0], gpus[0])
    else:
        vendors = ", ".join(dict.fromkeys(gpu_vendors().get(g, "?") for g in gpus))
        valid = [e for e in ENGINES if any(e in engines_for(g) for g in gpus)]
        message = (f"engine{'s' if len(engines) > 1 else ''} {', '.join(engines)} run{'' if len(engines) > 1 else 's'} "
                   f"on none of its GPUs {', '.join(gpus)} ({vendors}): no design of this space can run; engines "
                   f"for those GPUs: {', '.join(valid) or 'none'}")
    if default:
        message += f" (the space gives no engine: {engines[0]} is the default)"
    raise UserError(message, where=f"{spec.source}: {key}")


def default_scorer(space: Space) -> ScoreFn:
    """The production scoring function of a space: mapping search over the space's mapping choices, under
    the space's calibration (it travels to the actors with the function); the serving model's search for a
    serving space (its own calibration, objectives/serving_calibration.json)."""
    import objectives

    if is_serving_space(space):
        from objectives.serving import SERVING_CHOICES

        choices = space.mapping_choices(SERVING_CHOICES) if space.spec.mapping else None
        return functools.partial(score_serving, choices=choices)
    choices = space.mapping_choices(objectives.DEFAULT_CHOICES) if space.spec.mapping else None
    return functools.partial(score_with_mapping_search, choices=choices, cal=calibration_of(space.spec))


@dataclass
class Outcome:
    """What a batch's result table means for the search: one row per design."""

    #: objective values, (n, n_objectives), in the order of the space's objectives
    values: np.ndarray
    #: Optuna constraint name -> signed violation per design (<= 0 met)
    constraints: dict[str, np.ndarray]
    #: the model finds the design feasible
    feasible: np.ndarray
    #: the design meets every constraint of the space
    meets: np.ndarray

    @property
    def admissible(self) -> np.ndarray:
        """Feasible and within the space's constraints: a candidate for the front."""
        return self.feasible & self.meets

    @property
    def violation(self) -> np.ndarray:
        """The sum of every constraint's positive violation (0 for an admissible design)."""
        return np.sum([np.maximum(v, 0) for v in self.constraints.values()], axis=0)


class Problem:
    """The objectives and constraints of one space (see the module doc)."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.objectives = [o.metric for o in spec.objectives]
        self.directions = spec.directions

    def outcome(self, scored: Mapping[str, np.ndarray], n: int) -> Outcome:
        """The outcome of ``n`` scored designs; a result table without an objective or constraint column
        is a UserError (a custom scoring function that forgot one)."""
        spec = self.spec
        missing = [m for m in self.objectives if m not in scored]
        missing += [c.column for c in spec.constraints if c.column not in scored]
        if missing:
            raise UserError(f"the scoring function returned no column {missing[0]!r}", where=spec.source)
        values = np.column_stack([np.asarray(scored[m], dtype=np.float64) for m in self.objectives])
        feasible = np.asarray(scored["feasible"], dtype=bool) if "feasible" in scored else np.ones(n, dtype=bool)
        con_cols = [k for k in scored if k.startswith("con_")]
        if con_cols:
            worst = np.max(np.column_stack([np.asarray(scored[k], dtype=np.float64) for k in con_cols]), axis=1)
            worst = np.where(np.isnan(worst), np.inf, worst)
        else:
            worst = np.zeros(n)
        # the model's feasibility as one constraint: its worst con_* value, kept on the side the model decided
        model_violation = np.where(feasible, np.minimum(worst, 0.0), np.maximum(worst, 1e-9))
        constraints = {MODEL_CONSTRAINT: model_violation}
        meets = np.ones(n, dtype=bool)
        for c in spec.constraints:
            v = c.violation(scored[c.column])
            constraints[c.text] = v
            meets &= v <= 0
        return Outcome(values, constraints, feasible, meets)


def _key_path(spec: Spec, column: str | None) -> str:
    """Where a column comes from in the space file (for a one-line error)."""
    if column is None:
        return "space"
    if column in spec.workload:
        return f"workload.{column}"
    if any(d.name == column for d in spec.dimensions):
        return f"cluster.{column}"
    if column in spec.mapping:
        return f"mapping.{column}"
    return column


@contextlib.contextmanager
def model_errors(spec: Spec) -> Iterator[None]:
    """A user error raised by the model (bad input) becomes a one-line UserError naming the space's key."""
    try:
        yield
    except Exception as exc:  # a model InputError, maybe wrapped by Ray
        cause = getattr(exc, "cause", None) or exc
        if type(cause).__name__ == "InputError" or isinstance(cause, ValueError) and hasattr(cause, "column"):
            detail = getattr(cause, "detail", str(cause))
            column = getattr(cause, "column", None)
            raise UserError(f"the model rejects this space: {detail}", where=f"{spec.source}: {_key_path(spec, column)}") from None
        raise
