"""Reading a space file and validating it into a :class:`~dse.spec.schema.Spec`, one mistake one line."""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dse.errors import UserError, did_you_mean
from dse.spec.facility import facility_limits
from dse.spec.model_source import model_workload
from dse.spec.prices import side_files
from dse.spec.schema import (
    DEFAULT_SEARCH,
    RANGE_KEYS,
    SAMPLERS,
    SCALES,
    SEARCH_KEYS,
    TOP_KEYS,
    Constraint,
    Dimension,
    Objective,
    SearchSettings,
    Spec,
)
from dse.spec.vocabulary import Vocabulary
from dse.spec.yaml_file import read_yaml

__all__ = ["load_spec", "parse_spec", "MAX_SEED", "MAX_CHOICES", "MAX_TRIALS"]

#: the largest seed the samplers' random generator takes (numpy's MT19937 legacy seeding: 2**32 - 1)
MAX_SEED = 2**32 - 1

#: the most choices one dimension may list, and the most trials a search may ask for: stated ceilings (a
#: million-value list took minutes to check; trials 1e308 ran without bound)
MAX_CHOICES = 10_000
MAX_TRIALS = 10_000_000
_SHOW = reprlib.Repr()  # (keyword arguments only from Python 3.12)
_SHOW.maxlevel, _SHOW.maxlist, _SHOW.maxdict, _SHOW.maxstring, _SHOW.maxother = 2, 4, 4, 60, 60


def _show(value) -> str:
    """A bounded excerpt of a user's value for a one-line message (an aliased YAML structure can expand to
    gigabytes; reprlib stops early)."""
    return _SHOW.repr(value)


def _short_list(values: Sequence[str], limit: int = 40) -> str:
    values = list(values)
    text = ", ".join(values[:limit])
    return text + (f", ... ({len(values)} in all)" if len(values) > limit else "")


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
                self.fail(path, f"must be a number, not {_show(value)}")
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
        names = set(vocab.input_columns) | (set(vocab.metrics) if metrics_too else set())
        self.fail(path, f"unknown column '{name}'; {did_you_mean(name, names)}valid: "
                        f"{_short_list(sorted(vocab.input_columns))}"
                        + ("; or a metric: dse catalog metrics" if metrics_too else ""))

    def value(self, column: str, value, path: str):
        """One value of ``column``: a catalog id, a label or a number."""
        vocab = self.vocab
        if column in vocab.catalog_ids:
            ids = vocab.catalog_ids[column]
            if not isinstance(value, str) or value not in ids:
                note = vocab.removed_ids.get(column, {}).get(value) if isinstance(value, str) else None
                self.fail(path, f"{column} {_show(value)} {note}" if note else
                          f"unknown {column} {_show(value)}; {did_you_mean(value, ids)}valid: {_short_list(ids)}")
            return value
        if column in vocab.labels:
            labels = vocab.labels[column]
            if not isinstance(value, str) or value.strip().lower() not in labels:
                self.fail(path, f"{_show(value)} is not a valid {column}; valid: {', '.join(labels)}")
            return value.strip().lower()
        return self.number(value, path, integer=column in vocab.integer_columns)


def load_spec(path: str | Path, vocab: Vocabulary | None = None) -> Spec:
    """Read and validate a space file (called by ``dse sweep`` before any work)."""
    raw, text = read_yaml(path)
    return parse_spec(raw, source=str(path), vocab=vocab, text=text, default_name=Path(path).stem)


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
    files = side_files(ck, top)  # calibration:, prices:
    dimensions, limits = facility_limits(ck, top, workload, dimensions)  # facility_mw:, rack_kw_max: (n_gpus bounded)

    given = set(workload) | {d.name for d in dimensions} | {k for k, v in mapping.items() if len(v) == 1}
    if "gpu" not in given and _rents_only(workload, dimensions):  # every design rents: its instance names the GPU
        given.add("gpu")
    serving = {"input_len", "output_len"} <= given  # a serving space (objectives.serving, docs/serving.md)
    for col in (vocab.serving_required if serving else vocab.required):
        if col not in given:
            where = "workload" if col in ("global_batch", "model") else "cluster"
            ck.fail(f"{where}.{col}", "is required (a fixed value, a list of choices or a range)")
    if search.sampler == "grid":
        for d in dimensions:
            if d.kind == "float" and d.step is None:
                ck.fail(f"cluster.{d.name}", "the grid sampler needs every range discrete: give this range a step")
            if d.kind == "int" and d.step is None and not d.log and d.high - d.low + 1 > MAX_CHOICES:
                ck.fail(f"cluster.{d.name}", f"the grid would enumerate {d.high - d.low + 1:,} values; at most "
                                             f"{MAX_CHOICES:,} a range (give a step, or scale: pow2)")
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
        **files, **limits,
        raw=top,
        text=text,
    )


def _rents_only(workload: Mapping[str, Any], dimensions: Sequence[Dimension]) -> bool:
    """True where the space names cloud instances and no owned design (``instance: owned``): each design's GPU
    is its instance's (objectives/catalog/instances.py)."""
    values = [workload["instance"]] if "instance" in workload else \
        next((list(d.values) for d in dimensions if d.name == "instance"), [])
    return bool(values) and "owned" not in values


def _parse_workload(ck: _Checker, raw) -> dict[str, Any]:
    w = ck.mapping(raw, "workload")
    if "model" not in w:
        ck.fail("workload.model", f"is required: a catalog model; valid: {_short_list(ck.vocab.catalog_ids.get('model', ()))}")
    w, out = model_workload(ck, w)  # model: a config.json gives its architecture columns (dse.spec.model_source)
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
        if len(value) > MAX_CHOICES:
            ck.fail(path, f"lists {len(value):,} choices; at most {MAX_CHOICES:,} (use a range with a step)")
        values = tuple(ck.value(column, v, f"{path}[{i}]") for i, v in enumerate(value))
        if len(set(values)) != len(values):
            dup = next(v for v in values if values.count(v) > 1)
            ck.fail(path, f"lists {_show(dup)} twice")
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
            if n + 1 > MAX_CHOICES:
                ck.fail(f"{path}.step", f"gives {n + 1:,.0f} values; at most {MAX_CHOICES:,} a range (a coarser step)")
            if abs(n - round(n)) > 1e-9 * max(1.0, abs(n)) or (hi > lo and round(n) < 1):  # no step fits: Optuna
                ck.fail(f"{path}.step", f"max - min ({hi - lo:g}) must be a whole multiple of step ({step:g})")
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
        ck.fail("mapping", f"{_show(raw)} is not valid; give 'auto' or a mapping of column: [allowed values]")
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
            valid = sorted(_objective_metrics(ck.vocab))
            ck.fail(f"{path}.metric", f"'{metric}' is not a metric column; {did_you_mean(metric, valid)}"
                                      f"valid: {_short_list(valid)} (dse catalog metrics)")
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
        ck.fail("constraints", "must be a list like [\"facility_power_peak_mw <= 30\", \"n_gpus <= 16384\"]")
    out = []
    for i, item in enumerate(raw):
        path = f"constraints[{i}]"
        c = Constraint.from_text(item)
        if c is None:
            ck.fail(path, f"{_show(item)} is not 'COLUMN <= NUMBER' or 'COLUMN >= NUMBER'")
        column = c.column
        ck.column(column, path, metrics_too=True)
        if ck.vocab.is_text(column):
            ck.fail(path, f"{column} is a name, not a number to compare")
        out.append(c)
    return out


def _parse_search(ck: _Checker, raw) -> SearchSettings:
    s = ck.mapping(raw if raw is not None else {}, "search", SEARCH_KEYS)
    sampler = s.get("sampler", DEFAULT_SEARCH["sampler"])
    if sampler not in SAMPLERS:
        ck.fail("search.sampler", f"'{sampler}' is not a sampler; valid: {', '.join(SAMPLERS)}")
    trials = ck.number(s.get("trials", DEFAULT_SEARCH["trials"]), "search.trials", integer=True)
    if not 1 <= trials <= MAX_TRIALS:
        ck.fail("search.trials", f"must be a whole number from 1 to {MAX_TRIALS:,}, not {trials:.6g}")
    batch = ck.number(s.get("batch_size", DEFAULT_SEARCH["batch_size"]), "search.batch_size", integer=True)
    if batch < 2:
        ck.fail("search.batch_size", "must be at least 2 (it is the NSGA-II population)")
    seed = ck.number(s.get("seed", DEFAULT_SEARCH["seed"]), "search.seed", integer=True)
    if not 0 <= seed <= MAX_SEED:
        ck.fail("search.seed", f"must be a whole number from 0 to {MAX_SEED} (the samplers' generator), not {seed:.6g}")
    return SearchSettings(sampler=sampler, trials=trials, batch_size=batch, seed=seed)


def _type(value) -> str:
    return {dict: "a mapping", list: "a list", str: "text", bool: "true/false", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )
