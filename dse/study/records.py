"""A told batch as a plain record, by column, and the trials of a run rebuilt from its records.

:func:`batch_record` is called once per told batch (through :meth:`dse.study.Searcher.record`): the
batch's finished trials as JSON-able columns (numbers, parameters in Optuna's internal representation,
values, system attributes) plus the study system attributes new in the batch (NSGA-II's parents). The
record is stored in the batch's Parquet part, which is the batch's commit point, and the run's Optuna
journal is written from it (:mod:`dse.study.journal`). :class:`EncodedRecord` encodes each of its columns
to JSON once, for both. On resume, :func:`trials_from_records` turns the parts' records back into
finished trials (``optuna.trial.create_trial``, constraints among their system attributes as
``Trial.set_constraint`` stores them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

__all__ = ["STUDY_NAME", "batch_record", "trials_from_records", "study_attrs_of", "EncodedRecord",
           "internal_column", "ENCODER", "RECORD_ENCODER"]

#: the study's name, in this process and in the run's ``study.journal``
STUDY_NAME = "dse"

#: one encoder for every line (json.dumps with separators builds a new one per call)
ENCODER = json.JSONEncoder(separators=(",", ":"))
#: for records: what json.dumps(default=str) stores for a value JSON has no type for
RECORD_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


def internal_column(dist: BaseDistribution, values: list) -> list:
    """``dist.to_internal_repr`` of each value of one parameter: the choice's index for a categorical
    parameter, the float for a number (Optuna rejects NaN there), one column at a time."""
    if isinstance(dist, CategoricalDistribution):
        index: dict = {}
        for i, c in enumerate(dist.choices):  # the first equal choice, as choices.index finds it
            index.setdefault(c, i)
        try:
            return [index[v] for v in values]
        except (KeyError, TypeError):
            return [dist.to_internal_repr(v) for v in values]
    out = list(map(float, values))
    if any(v != v for v in out):
        return [dist.to_internal_repr(v) for v in values]  # raises as Optuna does
    return out


def batch_record(frozen: Sequence[FrozenTrial], new_study_attrs: Mapping[str, Any],
                 distributions: Mapping[str, BaseDistribution]) -> dict[str, Any]:
    """The JSON-able record of a told batch, by column: each trial's number, parameters (Optuna's internal
    representation), values and system attributes, plus ``new_study_attrs`` (the study system attributes
    new since the last record: NSGA-II's parents) and the batch's start and end (each trial's start and
    end too, where they differ: trials asked and told one by one)."""
    first = frozen[0].system_attrs if frozen else {}
    if all(t.system_attrs.keys() == first.keys() for t in frozen):  # a batch's trials share their keys
        keys = list(first)
    else:
        keys = sorted({k for t in frozen for k in t.system_attrs})
    starts = [t.datetime_start for t in frozen if t.datetime_start]
    ends = [t.datetime_complete for t in frozen if t.datetime_complete]
    out = {
        "number": [t.number for t in frozen],
        "params": {k: internal_column(d, [t.params[k] for t in frozen]) for k, d in distributions.items()},
        "values": [t.values for t in frozen],
        "system_attrs": {k: [t.system_attrs.get(k) for t in frozen] for k in keys},
        "study_system_attrs": dict(new_study_attrs),
        "datetime_start": min(starts).isoformat() if starts else None,
        "datetime_complete": max(ends).isoformat() if ends else None,
    }
    if len(starts) == len(frozen) and len(set(starts)) > 1:
        out["datetime_starts"] = [s.isoformat() for s in starts]
    if len(ends) == len(frozen) and len(set(ends)) > 1:
        out["datetime_completes"] = [e.isoformat() for e in ends]
    return out


def study_attrs_of(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The study system attributes the records hold, as of the last one."""
    attrs: dict[str, Any] = {}
    for rec in records:
        attrs.update(rec.get("study_system_attrs") or {})
    return attrs


def trials_from_records(records: Sequence[Mapping[str, Any]],
                        distributions: Mapping[str, BaseDistribution]) -> list[FrozenTrial]:
    """The finished trials of the records of committed parts, in order, with their start and end times."""
    trials: list[FrozenTrial] = []
    for rec in records:
        start = _dt(rec.get("datetime_start")) or datetime.now()
        end = _dt(rec.get("datetime_complete")) or start
        sys_cols = rec["system_attrs"]
        each_start = [_dt(x) for x in rec["datetime_starts"]] if rec.get("datetime_starts") else None
        each_end = [_dt(x) for x in rec["datetime_completes"]] if rec.get("datetime_completes") else None
        for i, number in enumerate(rec["number"]):
            params = {k: distributions[k].to_external_repr(v[i]) for k, v in rec["params"].items()}
            trial = optuna.trial.create_trial(
                state=TrialState.COMPLETE, values=rec["values"][i], params=params,
                distributions={k: distributions[k] for k in params},
                system_attrs={k: v[i] for k, v in sys_cols.items() if v[i] is not None})
            trial.number = number
            trial.datetime_start = each_start[i] if each_start else start
            trial.datetime_complete = each_end[i] if each_end else end
            trials.append(trial)
    return trials


def _dt(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


class EncodedRecord:
    """A batch's Optuna record (:func:`batch_record`) with each of its columns encoded to JSON
    once, by one encoder call: the batch's part stores the whole record's JSON (:attr:`text`) in its
    metadata, and the journal's lines (:func:`dse.study.journal.journal_lines`) cut the same column texts
    into one token per trial. Encoding the numbers is most of the cost of both."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self.record = record
        enc = RECORD_ENCODER.encode
        self.values = enc(record["values"])
        self.params = {k: enc(col) for k, col in record["params"].items()}
        self.system_attrs = {k: enc(col) for k, col in (record.get("system_attrs") or {}).items()}
        rest = {k: v for k, v in record.items() if k not in ("number", "params", "values", "system_attrs")}
        self.text = ("{" + f'"number":{enc(record["number"])},"params":{_object(self.params)},"values":{self.values},'
                     f'"system_attrs":{_object(self.system_attrs)}' + "".join(f",{enc(k)}:{enc(v)}" for k, v in rest.items())
                     + "}")


def _object(texts: Mapping[str, str]) -> str:
    """A JSON object from its keys and its values' JSON texts."""
    return "{" + ",".join(f"{ENCODER.encode(k)}:{v}" for k, v in texts.items()) + "}"
