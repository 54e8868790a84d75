"""Spaces: parse and validate a ``spaces/*.yaml`` file into a :class:`Spec` before any work starts.

A space declares the workload, the cluster dimensions to search, the mapping, the objectives, the
constraints and the search settings::

    name: gpt3-175b-gpus                 # optional, defaults to the file name
    description: GPT-3 175B on 300B tokens across four GPU generations
    workload:                            # fixed columns; ``model`` is a catalog id, the rest overrides
      model: gpt3-175b
      train_tokens: 300e9
      global_batch: 1536
    cluster:                             # any design-table column: a list, a range or a fixed value
      gpu: [a100-sxm-80gb, h100-sxm]     #   a list of choices (catalog ids are checked)
      n_gpus: {min: 1024, max: 16384, scale: pow2}   # a range: scale linear|log|pow2, optional step, type
      gpu_hbm_tbyte_s: {min: 3.35, max: 8.0}         # a catalog field: a what-if override
      network: ib-ndr-400                # a fixed value
    mapping: auto                        # or {tp: [1, 2, 4, 8], recompute: [selective]} (restricted lists)
    objectives:                          # one to three metric columns
      - {metric: time_to_train_days, direction: min}
      - tco_usd: min
    constraints: ["power_mw <= 30", "n_gpus <= 16384"]   # any metric or input column against a number
    search: {sampler: nsga2, trials: 4096, batch_size: 512, seed: 0}   # nsga2 | tpe | random | grid

A mapping column may also be listed under ``cluster``: it is then searched by the outer level (Optuna)
instead of enumerated per design.

:func:`load_spec` reads the file (safe YAML), :func:`parse_spec` validates a mapping. Every mistake is a
:class:`dse.errors.UserError` whose ``where`` is ``<file>: <key path>`` and whose message says what is
valid; the CLI prints it as one line and exits 2. Validation needs the model's vocabulary (columns,
metrics, catalog ids): :meth:`Vocabulary.from_objectives` reads it from the ``objectives`` package, and
tests may pass their own.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dse.errors import UserError

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

SAMPLERS = ("nsga2", "tpe", "random", "grid")
SCALES = ("linear", "log", "pow2")
TOP_KEYS = ("name", "description", "workload", "cluster", "mapping", "objectives", "constraints", "search")
SEARCH_KEYS = ("sampler", "trials", "batch_size", "seed")
RANGE_KEYS = ("min", "max", "scale", "step", "type")
DEFAULT_SEARCH = {"sampler": "nsga2", "trials": 2048, "batch_size": 512, "seed": 0}
_CONSTRAINT_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|<|>)\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)\s*$")


def _short_list(values: Sequence[str], limit: int = 40) -> str:
    values = list(values)
    text = ", ".join(values[:limit])
    return text + (f", ... ({len(values)} in all)" if len(values) > limit else "")


# ----------------------------------------------------------------------------------------------------
# what the model understands


@dataclass(frozen=True)
class Vocabulary:
    """What a space may name: design-table input columns, metric columns, catalog ids and labels.

    Built once per validation, from the ``objectives`` package (:meth:`from_objectives`) or by tests.
    """

    input_columns: frozenset[str]
    metrics: Mapping[str, str]
    mapping_columns: tuple[str, ...]
    catalog_ids: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    labels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    integer_columns: frozenset[str] = frozenset()
    #: column -> {id taken out of the catalog: what to use instead}
    removed_ids: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: column renamed for its unit -> what to say ("was renamed 'nic_gbyte_s' (GB/s)")
    renamed_columns: Mapping[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ("gpu", "n_gpus", "global_batch")

    def is_text(self, column: str) -> bool:
        """True for a column whose values are names (a catalog id or a label), not numbers."""
        return column in self.catalog_ids or column in self.labels

    @classmethod
    def from_objectives(cls) -> "Vocabulary":
        """The vocabulary of the installed ``objectives`` package (called once per :func:`load_spec`)."""
        import objectives
        from objectives import catalog, pipeline
        from objectives.renamed import renamed_note
        from objectives.table import CATEGORIES

        inputs = getattr(objectives, "INPUT_COLUMNS", None)
        if inputs is None:
            inputs = (
                set(pipeline.REQUIRED) | set(pipeline.DEFAULTS) | set(catalog.GPU_FIELDS) | set(catalog.MODEL_FIELDS)
                | set(objectives.MAPPING_COLUMNS) | set(CATEGORIES)
                | {"model", "gpu", "n_gpus", "global_batch", "train_tokens", "d_head", "network", "storage"}
            )
        ids: dict[str, tuple[str, ...]] = {"gpu": tuple(catalog.gpu_ids()), "model": tuple(catalog.model_ids())}
        for name in ("network", "storage"):
            getter = getattr(catalog, f"{name}_ids", None)
            if getter is not None:
                ids[name] = tuple(getter())
        return cls(
            input_columns=frozenset(inputs),
            metrics=dict(objectives.METRICS),
            mapping_columns=tuple(objectives.MAPPING_COLUMNS),
            catalog_ids=ids,
            labels={k: tuple(v) for k, v in CATEGORIES.items()},
            integer_columns=frozenset(getattr(pipeline, "INTEGER_COLUMNS", ())) | {"zero_stage", "sequence_parallel"},
            removed_ids=dict(getattr(catalog, "REMOVED", {})),
            renamed_columns={old: renamed_note(old) for old in objectives.RENAMED_COLUMNS},
        )


# ----------------------------------------------------------------------------------------------------
# the parsed space


@dataclass(frozen=True)
class Dimension:
    """One design-table column of the outer (cluster) level.

    ``kind`` is ``choice`` (``values`` lists the choices), ``int`` or ``float`` (a range from ``low`` to
    ``high``, optionally ``log`` and with a ``step``; int for whole-number columns unless ``type`` says), ``pow2`` (the powers of two from ``low`` to
    ``high``) or ``fixed`` (``values`` holds the one value).
    """

    name: str
    kind: str
    values: tuple = ()
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None

    @property
    def searched(self) -> bool:
        return self.kind != "fixed" and not (self.kind == "choice" and len(self.values) == 1)


@dataclass(frozen=True)
class Objective:
    """A metric column to minimize or maximize."""

    metric: str
    direction: str  # "min" or "max"


@dataclass(frozen=True)
class Constraint:
    """``column op bound``; :meth:`violation` is > 0 where violated, relative to the bound's size."""

    column: str
    op: str
    bound: float

    @property
    def text(self) -> str:
        return f"{self.column} {self.op} {self.bound:g}"

    def violation(self, values):
        """Signed violation (<= 0 satisfied), scaled by ``|bound|`` so constraints add up fairly."""
        import numpy as np

        scale = abs(self.bound) if self.bound != 0 else 1.0
        v = np.asarray(values, dtype=np.float64)
        out = (v - self.bound) / scale if self.op in ("<=", "<") else (self.bound - v) / scale
        return np.where(np.isnan(out), np.inf, out)


@dataclass(frozen=True)
class SearchSettings:
    """How Optuna searches: sampler, total trials, designs per ask (an NSGA-II generation), seed."""

    sampler: str = "nsga2"
    trials: int = 2048
    batch_size: int = 512
    seed: int = 0


@dataclass(frozen=True)
class Spec:
    """A validated space. ``raw`` is the mapping as given; :meth:`resolved` the normalized form."""

    name: str
    source: str
    workload: Mapping[str, Any]
    dimensions: tuple[Dimension, ...]
    mapping: Mapping[str, tuple]
    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...]
    search: SearchSettings
    description: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)
    text: str = field(default="", compare=False)

    def resolved(self) -> dict[str, Any]:
        """The space with every default filled in, as plain JSON-able data (for run.json)."""
        return {
            "name": self.name,
            "description": self.description,
            "workload": dict(self.workload),
            "cluster": {d.name: _dimension_json(d) for d in self.dimensions},
            "mapping": {k: list(v) for k, v in self.mapping.items()} or "auto",
            "objectives": [asdict(o) for o in self.objectives],
            "constraints": [c.text for c in self.constraints],
            "search": asdict(self.search),
        }

    @property
    def space_hash(self) -> str:
        """Hash of everything that decides which designs are proposed and how they score.

        Excludes the name, the description and ``search.trials``, so a run can be resumed with more trials.
        """
        r = self.resolved()
        r.pop("name"), r.pop("description")
        r["search"] = {k: v for k, v in r["search"].items() if k != "trials"}
        blob = json.dumps(r, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def directions(self) -> list[str]:
        return [o.direction for o in self.objectives]

    def with_search(self, **changes) -> "Spec":
        """A copy with some search settings changed (``trials``, ``seed``, ...), as the CLI flags ask."""
        from dataclasses import replace

        return replace(self, search=replace(self.search, **changes))


def _dimension_json(d: Dimension) -> Any:
    if d.kind == "fixed":
        return d.values[0]
    if d.kind == "choice":
        return list(d.values)
    out: dict[str, Any] = {"min": d.low, "max": d.high}
    if d.kind == "pow2":
        out["scale"] = "pow2"
    else:
        out["type"] = d.kind
        if d.log:
            out["scale"] = "log"
        if d.step is not None:
            out["step"] = d.step
    return out


# ----------------------------------------------------------------------------------------------------
# parsing


class _Checker:
    """Raises :class:`UserError` with ``<file>: <key path>`` for every mistake."""

    def __init__(self, source: str, vocab: Vocabulary):
        self.source = source
        self.vocab = vocab

    def fail(self, path: str, message: str) -> None:
        raise UserError(message, where=f"{self.source}: {path}" if path else self.source)

    def mapping(self, value, path: str, keys: Sequence[str] | None = None) -> dict:
        if not isinstance(value, Mapping):
            self.fail(path, f"must be a mapping (key: value), not {_type(value)}")
        for k in value:
            if not isinstance(k, str):
                self.fail(path, f"key {k!r} must be a name")
            if keys is not None and k not in keys:
                self.fail(f"{path}.{k}" if path else k, f"unknown key; valid: {', '.join(keys)}")
        return dict(value)

    def number(self, value, path: str, integer: bool = False) -> float | int:
        if isinstance(value, str):  # YAML 1.1 reads 300e9 as text
            try:
                value = float(value.replace("_", "")) if any(c in value for c in ".eE") else int(value.replace("_", ""))
            except ValueError:
                self.fail(path, f"must be a number, not '{value}'")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(path, f"must be a number, not {_type(value)}")
        if isinstance(value, int) and abs(value) > 1.7976931348623157e308:  # beyond float64: 10**400
            self.fail(path, "must be a finite number, not an integer of more than 308 digits")
        if not math.isfinite(value):
            self.fail(path, f"must be a finite number, not {value}")
        if integer:
            if float(value) != round(float(value)):
                self.fail(path, f"must be a whole number, not {value:g}")
            return int(round(float(value)))
        return int(value) if isinstance(value, int) else float(value)

    def column(self, name: str, path: str, *, metrics_too: bool = False) -> None:
        vocab = self.vocab
        if name in vocab.input_columns or (metrics_too and name in vocab.metrics):
            return
        if name in vocab.renamed_columns:
            self.fail(path, f"'{name}' {vocab.renamed_columns[name]}")
        if name in vocab.metrics:
            self.fail(path, f"'{name}' is a metric (an output of the model), not an input column")
        self.fail(path, f"unknown column '{name}'; valid: {_short_list(sorted(vocab.input_columns))}")

    def value(self, column: str, value, path: str):
        """One value of ``column``: a catalog id, a label or a number."""
        vocab = self.vocab
        if column in vocab.catalog_ids:
            ids = vocab.catalog_ids[column]
            if not isinstance(value, str) or value not in ids:
                note = vocab.removed_ids.get(column, {}).get(value) if isinstance(value, str) else None
                self.fail(path, f"{column} '{value}' {note}" if note else f"unknown {column} '{value}'; valid: {_short_list(ids)}")
            return value
        if column in vocab.labels:
            labels = vocab.labels[column]
            if not isinstance(value, str) or value.strip().lower() not in labels:
                self.fail(path, f"'{value}' is not a valid {column}; valid: {', '.join(labels)}")
            return value.strip().lower()
        return self.number(value, path, integer=column in vocab.integer_columns)


def load_spec(path: str | Path, vocab: Vocabulary | None = None) -> Spec:
    """Read and validate a space file (called by ``dse sweep`` before any work)."""
    p = Path(path)
    source = str(path)
    if not p.is_file():
        raise UserError("no such space file", where=source)
    text = p.read_text()
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{line}not valid YAML: {problem}", where=source) from None
    return parse_spec(raw, source=source, vocab=vocab, text=text, default_name=p.stem)


def parse_spec(
    raw: Any,
    source: str = "<space>",
    vocab: Vocabulary | None = None,
    text: str = "",
    default_name: str = "space",
) -> Spec:
    """Validate a space given as a mapping; returns a :class:`Spec` or raises :class:`UserError`."""
    vocab = vocab or Vocabulary.from_objectives()
    ck = _Checker(source, vocab)
    top = ck.mapping(raw if raw is not None else {}, "", TOP_KEYS)
    for key in ("workload", "cluster", "objectives"):
        if key not in top:
            ck.fail(key, "is required")

    name = top.get("name", default_name)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
        ck.fail("name", "must be a name of letters, digits, '-', '_' or '.'")
    description = top.get("description", "")
    if not isinstance(description, str):
        ck.fail("description", f"must be text, not {_type(description)}")

    workload = _parse_workload(ck, top["workload"])
    dimensions = _parse_cluster(ck, top["cluster"], workload)
    mapping = _parse_mapping(ck, top.get("mapping", "auto"), dimensions, workload)
    objectives = _parse_objectives(ck, top["objectives"])
    constraints = _parse_constraints(ck, top.get("constraints", []))
    search = _parse_search(ck, top.get("search", {}))

    given = set(workload) | {d.name for d in dimensions} | {k for k, v in mapping.items() if len(v) == 1}
    for col in vocab.required:
        if col not in given:
            where = "workload" if col in ("global_batch", "model") else "cluster"
            ck.fail(f"{where}.{col}", "is required (a fixed value, a list of choices or a range)")
    if search.sampler == "grid":
        for d in dimensions:
            if d.kind == "float" and d.step is None:
                ck.fail(f"cluster.{d.name}", "the grid sampler needs every range discrete: give this range a step")
    return Spec(
        name=name,
        source=source,
        workload=workload,
        dimensions=tuple(dimensions),
        mapping=mapping,
        objectives=tuple(objectives),
        constraints=tuple(constraints),
        search=search,
        description=description.strip(),
        raw=top,
        text=text,
    )


def _parse_workload(ck: _Checker, raw) -> dict[str, Any]:
    w = ck.mapping(raw, "workload")
    if "model" not in w:
        ck.fail("workload.model", f"is required: a catalog model; valid: {_short_list(ck.vocab.catalog_ids.get('model', ()))}")
    out: dict[str, Any] = {}
    for key, value in w.items():
        path = f"workload.{key}"
        ck.column(key, path)
        if key in ck.vocab.mapping_columns:
            ck.fail(path, "is a mapping column; put it under 'mapping'")
        if isinstance(value, (list, dict)):
            ck.fail(path, "the workload is fixed: give one value (search a column by moving it under 'cluster')")
        out[key] = ck.value(key, value, path)
    return out


def _parse_cluster(ck: _Checker, raw, workload: Mapping[str, Any]) -> list[Dimension]:
    c = ck.mapping(raw, "cluster")
    dims = []
    for key, value in c.items():
        path = f"cluster.{key}"
        ck.column(key, path)
        if key in workload:
            ck.fail(path, "is also given under 'workload'; give it once")
        dims.append(_parse_dimension(ck, key, value, path))
    return dims


def _parse_dimension(ck: _Checker, column: str, value, path: str) -> Dimension:
    vocab = ck.vocab
    if isinstance(value, list):
        if not value:
            ck.fail(path, "an empty list of choices; give at least one value")
        values = tuple(ck.value(column, v, f"{path}[{i}]") for i, v in enumerate(value))
        if len(set(values)) != len(values):
            dup = next(v for v in values if values.count(v) > 1)
            ck.fail(path, f"lists {dup!r} twice")
        return Dimension(column, "choice", values=values)
    if isinstance(value, Mapping):
        r = ck.mapping(value, path, RANGE_KEYS)
        if vocab.is_text(column):
            ck.fail(path, f"{column} takes names, not a range: give a list of choices")
        for k in ("min", "max"):
            if k not in r:
                ck.fail(f"{path}.{k}", "is required for a range (min, max; optional scale, step, type)")
        scale = r.get("scale", "linear")
        if scale not in SCALES:
            ck.fail(f"{path}.scale", f"'{scale}' is not a scale; valid: {', '.join(SCALES)}")
        kind = r.get("type")
        if kind is not None and kind not in ("int", "float"):
            ck.fail(f"{path}.type", f"'{kind}' is not a range type; valid: int, float")
        integer_col = column in vocab.integer_columns
        lo = ck.number(r["min"], f"{path}.min")
        hi = ck.number(r["max"], f"{path}.max")
        if kind is None:  # the column decides: whole-number columns take int ranges
            kind = "int" if integer_col else "float"
        if kind == "float" and integer_col:
            ck.fail(f"{path}.type", f"{column} is a whole number: the range must be int")
        if lo > hi:
            ck.fail(path, f"empty range: min {lo:g} is above max {hi:g}")
        if kind == "int":
            for k, v in (("min", lo), ("max", hi)):
                if abs(v) > 2**53:
                    ck.fail(f"{path}.{k}", f"{v:g} is too large for a whole-number range (at most 2^53 = {2**53})")
        elif not math.isfinite(hi - lo):
            ck.fail(path, f"the range {lo:g} to {hi:g} is too wide to sample (its width overflows)")
        if scale == "pow2":
            if lo < 1:
                ck.fail(f"{path}.min", "a pow2 range needs min >= 1")
            if "step" in r:
                ck.fail(f"{path}.step", "a pow2 range takes no step")
            k0, k1 = math.ceil(math.log2(lo) - 1e-9), math.floor(math.log2(hi) + 1e-9)
            if k0 > k1:
                ck.fail(path, f"empty range: no power of two between {lo:g} and {hi:g}")
            return Dimension(column, "pow2", low=float(2**k0), high=float(2**k1))
        if scale == "log" and lo <= 0:
            ck.fail(f"{path}.min", "a log range needs min > 0")
        step = None
        if "step" in r:
            step = ck.number(r["step"], f"{path}.step", integer=kind == "int")
            if step <= 0:
                ck.fail(f"{path}.step", "must be > 0")
            if scale == "log":
                ck.fail(f"{path}.step", "a log range takes no step")
            n = (hi - lo) / step
            if abs(n - round(n)) > 1e-9 * max(1.0, abs(n)):
                ck.fail(f"{path}.step", f"max - min ({hi - lo:g}) must be a multiple of step ({step:g})")
        if kind == "int":
            lo_i, hi_i = ck.number(lo, f"{path}.min", integer=True), ck.number(hi, f"{path}.max", integer=True)
            return Dimension(column, "int", low=lo_i, high=hi_i, log=scale == "log", step=step)
        return Dimension(column, "float", low=float(lo), high=float(hi), log=scale == "log", step=step)
    if value is None:
        ck.fail(path, "has no value; give a value, a list of choices or a range {min, max}")
    return Dimension(column, "fixed", values=(ck.value(column, value, path),))


def _parse_mapping(ck: _Checker, raw, dims: Sequence[Dimension], workload: Mapping[str, Any]) -> dict[str, tuple]:
    if raw is None or raw == "auto":
        return {}
    if isinstance(raw, str):
        ck.fail("mapping", f"'{raw}' is not valid; give 'auto' or a mapping of column: [allowed values]")
    m = ck.mapping(raw, "mapping")
    outer = {d.name for d in dims}
    out: dict[str, tuple] = {}
    for key, value in m.items():
        path = f"mapping.{key}"
        if key not in ck.vocab.mapping_columns:
            ck.fail(path, f"unknown mapping column; valid: {', '.join(ck.vocab.mapping_columns)}")
        if key in outer:
            ck.fail(path, "is also a cluster dimension; search it in one place")
        values = value if isinstance(value, list) else [value]
        if not values:
            ck.fail(path, "an empty list of choices; give at least one value")
        parsed = tuple(ck.value(key, v, f"{path}[{i}]" if isinstance(value, list) else path) for i, v in enumerate(values))
        if len(set(parsed)) != len(parsed):
            ck.fail(path, "lists a value twice")
        out[key] = parsed
    return out


def _parse_objectives(ck: _Checker, raw) -> list[Objective]:
    if not isinstance(raw, list) or not raw:
        ck.fail("objectives", "must be a list of one to three objectives, e.g. - {metric: time_to_train_days, direction: min}")
    if len(raw) > 3:
        ck.fail("objectives", f"has {len(raw)} objectives; give one, two or three")
    out: list[Objective] = []
    for i, item in enumerate(raw):
        path = f"objectives[{i}]"
        if isinstance(item, Mapping) and set(item) <= {"metric", "direction"} and "metric" in item:
            metric, direction = item["metric"], item.get("direction", "min")
        elif isinstance(item, Mapping) and len(item) == 1:
            (metric, direction), = item.items()
        elif isinstance(item, str):
            metric, direction = item, "min"
        else:
            ck.fail(path, "must be {metric: NAME, direction: min|max} or NAME: min|max")
        if isinstance(metric, str) and metric in ck.vocab.renamed_columns:
            ck.fail(f"{path}.metric", f"'{metric}' {ck.vocab.renamed_columns[metric]}")
        if not isinstance(metric, str) or metric not in ck.vocab.metrics:
            ck.fail(f"{path}.metric", f"'{metric}' is not a metric column; valid: {_short_list(sorted(_objective_metrics(ck.vocab)))}")
        if direction not in ("min", "max"):
            ck.fail(f"{path}.direction", f"'{direction}' is not valid; valid: min, max")
        if any(o.metric == metric for o in out):
            ck.fail(f"{path}.metric", f"'{metric}' is already an objective")
        out.append(Objective(metric, direction))
    return out


def _objective_metrics(vocab: Vocabulary) -> list[str]:
    return [m for m in vocab.metrics if not m.startswith("con_") and m != "feasible"]


def _parse_constraints(ck: _Checker, raw) -> list[Constraint]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        ck.fail("constraints", "must be a list like [\"power_mw <= 30\", \"n_gpus <= 16384\"]")
    out = []
    for i, item in enumerate(raw):
        path = f"constraints[{i}]"
        m = _CONSTRAINT_RE.match(item) if isinstance(item, str) else None
        if m is None:
            ck.fail(path, f"{item!r} is not 'COLUMN <= NUMBER' or 'COLUMN >= NUMBER'")
        column, op, bound = m.group(1), m.group(2), float(m.group(3))
        ck.column(column, path, metrics_too=True)
        if ck.vocab.is_text(column):
            ck.fail(path, f"{column} is a name, not a number to compare")
        out.append(Constraint(column, op, bound))
    return out


def _parse_search(ck: _Checker, raw) -> SearchSettings:
    s = ck.mapping(raw if raw is not None else {}, "search", SEARCH_KEYS)
    sampler = s.get("sampler", DEFAULT_SEARCH["sampler"])
    if sampler not in SAMPLERS:
        ck.fail("search.sampler", f"'{sampler}' is not a sampler; valid: {', '.join(SAMPLERS)}")
    trials = ck.number(s.get("trials", DEFAULT_SEARCH["trials"]), "search.trials", integer=True)
    if trials < 1:
        ck.fail("search.trials", "must be at least 1")
    batch = ck.number(s.get("batch_size", DEFAULT_SEARCH["batch_size"]), "search.batch_size", integer=True)
    if batch < 2:
        ck.fail("search.batch_size", "must be at least 2 (it is the NSGA-II population)")
    seed = ck.number(s.get("seed", DEFAULT_SEARCH["seed"]), "search.seed", integer=True)
    if seed < 0:
        ck.fail("search.seed", "must be >= 0")
    return SearchSettings(sampler=sampler, trials=trials, batch_size=batch, seed=seed)


def _type(value) -> str:
    return {dict: "a mapping", list: "a list", str: "text", bool: "true/false", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )
