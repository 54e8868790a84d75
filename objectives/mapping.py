"""Exhaustive, vectorized search of the mapping (how a job runs on a given cluster).

For every design row, the mapping columns it leaves blank are enumerated from ``choices`` (a cartesian
product), candidates that cannot lay out (divisibility, `Layout`) or that no practitioner would run are
dropped before the model runs, every remaining candidate is evaluated vectorized (the mapping-dependent
modules, after the design-only ones ran once per design), and the row keeps the best feasible one: least
step time, ties to less HBM (docs/architecture.md, two-level search); the economics modules (checkpoints,
failures, power, cost) then run once per design on that mapping. A row with no feasible candidate keeps its
least-infeasible one (smallest memory overflow) with feasible=False. A row that leaves no mapping cell blank
is its own one candidate: a table of such rows runs through every module as it is, in one chunked pass,
with nothing enumerated.

The rules a candidate must pass are those of :mod:`objectives.training.divisibility` (the same Layout counts), plus
its search-only pruning rules (tp inside the scale-up domain, cp only for long sequences, sequence
parallelism only with tp > 1: a searched tp 1 candidate is enumerated once, with it off, whatever the
choices, so that the rule never drops it). A row none of whose candidates passes gets one fallback
candidate marked with the rule that ended the last of them (``search_lost_rule``), so that its
``infeasible_reason`` says why no mapping works.

Memory is bounded by candidates, not rows: candidates are enumerated at most :data:`CANDIDATE_BUDGET`
(2^18) at a time, in pieces of whole rows (a row of 5,000 candidates fills a piece that holds hundreds of
rows of 10), and evaluated in slices of :data:`MAX_JOINED_ROWS`; only each row's winner is kept. The
search's peak is about the budget times 170 bytes a candidate-row (~45 MiB), on top of the rows' own
input and output columns, for any table length; the result is the same, bit for bit, as enumerating every
candidate at once (tests/test_mapping_slices.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from objectives import catalog
from objectives.base import Model
from objectives.calibration import Calibration
from objectives.pipeline import (
    CHUNK_ROWS,
    DESIGN_MODELS,
    ECONOMICS_MODELS,
    MAPPING_COLUMNS,
    MAPPING_MODELS,
    check_layout,
    prepare,
    rental_labels,
    run_models,
)
from objectives.reasons import LOST_RULE, REASON_COLUMNS, infeasible_reason
from objectives.table import CATEGORIES, Columns, InputError, as_columns, encode, factorize, is_constant
from objectives.training.divisibility import CP_MIN_SEQ_LEN, RULES, SEARCH_RULES, Job, Rule

__all__ = ["DEFAULT_CHOICES", "CANDIDATE_BUDGET", "search_mapping", "enumerate_mappings", "iter_mappings", "blank_cells",
           "needed_models", "CP_MIN_SEQ_LEN"]

DEFAULT_CHOICES: dict[str, tuple] = {
    "tp": (1, 2, 4, 8, 16, 32, 64),
    "pp": (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64),
    "cp": (1, 2, 4, 8, 16, 32),
    "ep": (1, 2, 4, 8, 16, 32, 64),
    "vp": (1, 2, 4),
    "micro_batch": (1, 2, 4),
    "recompute": ("selective", "full"),
    "sequence_parallel": (1,),
    "zero_stage": (1, 3),
}
#: candidates evaluated at once: half a pipeline chunk, so that a slice (whole designs, a little more) runs as
#: one chunk and its candidates, all but each design's best thrown away, are never copied into full columns
MAX_JOINED_ROWS = CHUNK_ROWS // 2
#: candidate-rows (one row's one candidate mapping) enumerated at once (:func:`iter_mappings`), however many
#: rows and candidates a row: the search's working memory is about this times 170 bytes, ~45 MiB (benchmarks/
#: evaluate_memory.py: peak RSS rose 318 MiB from a budget of 2^16 to 2^21, 164 B per candidate-row).
#: Smaller costs time (each piece's fixed costs: 2^14 is ~30% slower), larger costs memory and gains no time
CANDIDATE_BUDGET = 1 << 18


def blank_cells(values: np.ndarray) -> np.ndarray:
    """True where a cell is missing: NaN, an empty string or 'null' (a None cell is the label 'none').

    A text column is checked by its distinct values (object identity first, :func:`factorize`), so a column
    of a million repeated labels costs one hash per row, not a string operation per row."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind in "iub":
        return np.zeros(len(values), dtype=bool)
    if values.dtype.kind != "O" or is_constant(values):
        return _blank_text(values)
    codes, distinct = factorize(values)
    blank = np.append(_blank_text(np.asarray(distinct, dtype=object)), False).take(codes)
    missing = np.flatnonzero(codes < 0)  # None and NaN: told apart by their text, as for any other cell
    if len(missing):
        blank[missing] = _blank_text(values[missing])
    return blank


def _blank_text(values: np.ndarray) -> np.ndarray:
    as_str = values.astype(str)
    return np.isin(np.char.lower(np.char.strip(as_str)), ("", "nan", "none_", "null"))


# Staged enumeration: mapping columns are added one at a time, and each rule runs as soon as the columns it
# reads exist, so invalid combinations are dropped before the next column multiplies them.
_ORDER = ("tp", "pp", "cp", "micro_batch", "ep", "vp", "sequence_parallel", "recompute", "zero_stage")


def _stages() -> tuple[tuple[str, tuple[Rule, ...]], ...]:
    """(column, the rules that can run once it exists) in enumeration order; every rule runs once."""
    seen: set[str] = set()
    stages = []
    for name in _ORDER:
        before = set(seen)
        seen.add(name)
        stages.append((name, tuple(r for r in RULES + SEARCH_RULES if set(r.reads) <= seen and not set(r.reads) <= before)))
    return tuple(stages)


STAGES = _stages()
#: the design columns the mapping-dependent modules read: only these are gathered into every candidate
_CANDIDATE_INPUTS = frozenset().union(*(m.requires for m in MAPPING_MODELS)) - frozenset(MAPPING_COLUMNS)


class _Gathered(dict):
    """The candidates' columns, and each design column the rules read gathered per candidate when first read
    (a column constant over the table as its one value)."""

    def __init__(self, floats: Columns, owner: np.ndarray, cand: Columns):
        super().__init__(cand)
        self.floats, self.owner = floats, owner

    def __missing__(self, name: str) -> np.ndarray:
        column = self.floats[name]
        self[name] = value = column[:1] if is_constant(column) else column[self.owner]
        return value

    def get(self, name, default=None):
        return self[name] if name in self or name in self.floats else default


def enumerate_mappings(floats: Columns, rows: np.ndarray, searched: Sequence[str],
                       choices: Mapping[str, np.ndarray], sp_follows_tp: np.ndarray) -> tuple[np.ndarray, Columns]:
    """Valid mapping candidates of ``rows``: (owner row of each candidate, mapping columns), all at once.

    Searched columns take every value in ``choices``; the others keep the row's value, except that
    sequence parallelism follows tp where ``sp_follows_tp``. A row left with no candidate gets one (its
    given values, first choices), whose ``search_lost_rule`` column names the first rule of the stage that
    no candidate of the row passed, so that the model can say why it fails (0 on every other candidate).
    """
    return next(iter_mappings(floats, rows, searched, choices, sp_follows_tp, budget=np.inf))


def iter_mappings(floats: Columns, rows: np.ndarray, searched: Sequence[str], choices: Mapping[str, np.ndarray],
                  sp_follows_tp: np.ndarray, budget: float | None = None) -> Iterator[tuple[np.ndarray, Columns]]:
    """:func:`enumerate_mappings` in pieces of whole rows, in row order (each piece's fallback candidates
    last), so that no stage expands more than ``budget`` candidates (default :data:`CANDIDATE_BUDGET`) at
    once: a stage that would is first cut into parts of whole rows, each expanded in turn, depth first; the
    parts are copied, so the piece they came from is freed. Only a single row can exceed the budget (a
    stage's candidates of one row are at most the product of ``choices``). ``rows``: sorted."""
    budget = CANDIDATE_BUDGET if budget is None else budget
    lost_rule = np.zeros(int(rows.max()) + 1 if len(rows) else 0)
    stack = [(0, rows, rows, {})]  # (next stage, the piece's rows, owner of each candidate, candidates)
    while stack:
        stage, piece, owner, cand = stack.pop()
        for at in range(stage, len(STAGES)):  # the piece resumes at its stage
            name, rules = STAGES[at]
            if name in searched:
                values = choices[name]
                if len(owner) * len(values) > budget and owner[0] != owner[-1]:
                    edges = _row_edges(owner, int(budget // len(values)))
                    cuts = np.searchsorted(piece, owner[edges[1:-1]])  # a row lost before goes with its neighbours
                    for lo, hi, part in reversed(list(zip(edges[:-1], edges[1:], np.split(piece, cuts)))):
                        stack.append((at, part, owner[lo:hi].copy(), {k: v[lo:hi].copy() for k, v in cand.items()}))
                    break
                owner = np.repeat(owner, len(values))
                cand = {k: np.repeat(v, len(values)) for k, v in cand.items()}
                cand[name] = np.tile(values, len(owner) // len(values))
                if name == "sequence_parallel":  # a no-op at tp 1 (it splits the tp group's activations): a tp 1
                    solo = ~(cand["tp"] > 1)  # candidate runs it off, once, not dropped by rule sp_tp for choices (1,)
                    keep = ~solo | (np.arange(len(owner)) % len(values) == 0)
                    cand[name] = np.where(solo, 0.0, cand[name])
                    owner, cand = owner[keep], {k: v[keep] for k, v in cand.items()}
            elif name == "sequence_parallel":
                cand[name] = np.where(sp_follows_tp[owner], (cand["tp"] > 1) * 1.0, floats[name][owner])
            else:
                cand[name] = floats[name][owner]
            rules = tuple(r for r in rules if r.kind != "search" or name in searched)  # pruning prunes only a search
            if rules:
                job = Job(_Gathered(floats, owner, cand))
                oks = [rule.ok(job) for rule in rules]
                keep = np.broadcast_to(np.logical_and.reduce(oks), owner.shape)
                # rows whose last candidates this stage drops (counted over the piece's rows, not the table's)
                base, size = (piece[0], piece[-1] - piece[0] + 1) if len(piece) else (0, 0)
                at_row = owner - base
                gone = np.flatnonzero((np.bincount(at_row, minlength=size) > 0) & (np.bincount(at_row[keep], minlength=size) == 0))
                if len(gone):
                    passed = np.stack([np.bincount(at_row, np.broadcast_to(ok, owner.shape), minlength=size)[gone] for ok in oks])
                    # a rule of given columns alone is named by the model on the fallback (the given mapping's own
                    # numbers); one that read a searched column says no candidate passed it
                    codes = np.array([r.code if set(r.reads) & set(searched) else 0 for r in rules])
                    lost_rule[gone + base] = codes[np.argmax(passed == 0, axis=0)]
                owner, cand = owner[keep], {k: v[keep] for k, v in cand.items()}
                del job, oks, keep  # the stage's unfiltered columns, freed before the next stage expands
        else:
            yield _with_fallbacks(floats, piece, owner, cand, searched, choices, lost_rule)


def _with_fallbacks(floats: Columns, rows: np.ndarray, owner: np.ndarray, cand: Columns, searched: Sequence[str],
                    choices: Mapping[str, np.ndarray], lost_rule: np.ndarray) -> tuple[np.ndarray, Columns]:
    """``owner`` and ``cand`` with one fallback candidate appended for each of ``rows`` left with none."""
    lost = np.setdiff1d(rows, owner)
    cand[LOST_RULE] = np.zeros(len(owner))
    if len(lost):
        owner = np.concatenate([owner, lost])
        for name in cand:
            fallback = np.full(len(lost), choices[name][0]) if name in searched else \
                lost_rule[lost] if name == LOST_RULE else floats[name][lost]
            cand[name] = np.concatenate([cand[name], fallback])
    return owner, cand


def _row_edges(owner: np.ndarray, limit: int) -> np.ndarray:
    """Offsets (0 .. len) cutting sorted ``owner`` into parts of whole rows: those whose first candidate lies in
    one stretch of ``limit`` (< ``limit`` + one row's each); two parts at least if over ``limit`` in two rows."""
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    stretch = starts // max(limit, 1)
    edges = starts[np.r_[True, stretch[1:] != stretch[:-1]]]
    if len(edges) == 1 and len(starts) > 1 and len(owner) > limit:
        edges = np.r_[0, starts[-1]]  # every row starts in the first stretch: the last one goes alone
    return np.r_[edges, len(owner)]


def _mark_lost(work: Columns) -> Columns:
    """A row's fallback candidate (no candidate passed the rules) is infeasible whatever the model says."""
    lost = work[LOST_RULE] > 0
    if not lost.any():
        return work
    return {**work, "feasible": work["feasible"] & ~lost,
            "con_layout": np.where(lost, np.maximum(work["con_layout"], 1.0), work["con_layout"])}


def _best(work: Columns, owner: np.ndarray) -> np.ndarray:
    """Index of each owner's best candidate: feasible first, then least step time, then least HBM; an
    infeasible row's least-infeasible candidate (layout, then precision, then memory overflow).
    ``owner`` is sorted, so each row's candidates form one segment: O(n) segment minima, no sort."""
    feasible = work["feasible"]
    key1 = np.where(feasible, work["step_time_s"], np.inf)
    key2 = np.where(feasible, work["hbm_used_gb"],
                    work["con_memory"] + 1e9 * work["con_layout"] + 1e6 * work["con_precision"])
    # a NaN (a nonsense override: d_head 0, a NaN rate) ranks last and never hides the row's other candidates
    key1, key2 = np.where(np.isnan(key1), np.inf, key1), np.where(np.isnan(key2), np.inf, key2)
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    segment = np.cumsum(np.r_[True, owner[1:] != owner[:-1]]) - 1
    any_feasible = np.maximum.reduceat(feasible, starts)
    key1 = np.where(any_feasible[segment], key1, 0.0)  # rows with nothing feasible rank on key2 alone
    tied = key1 == np.minimum.reduceat(key1, starts)[segment]
    key2 = np.where(tied, key2, np.inf)
    best = tied & (key2 == np.minimum.reduceat(key2, starts)[segment])
    first = np.flatnonzero(best)
    return first[np.r_[True, owner[first][1:] != owner[first][:-1]]]


def search_mapping(table: Mapping[str, object], choices: Mapping[str, Sequence] | None = None,
                   cal: Calibration | None = None, outputs: Iterable[str] | None = None,
                   check_rows: np.ndarray | None = None) -> Columns:
    """Best feasible mapping per row; see the module docstring and docs/model-contract.md.

    A row whose every mapping column is given is evaluated as it is, without enumeration (it is its own
    one candidate; ``n_mappings_tried`` 1). ``outputs``: the model outputs the caller needs (default: all);
    an economics module none of them needs, directly or through another, is not run, and other outputs
    may be absent (the input columns are always there; ``infeasible_reason`` only where asked for).
    ``check_rows``: a row mask whose rows' given mappings must describe a job
    (:func:`objectives.pipeline.check_layout` on the prepared columns, an InputError naming the table's
    row otherwise), as `dse evaluate` requires of a fixed mapping."""
    search_sp = bool(choices and "sequence_parallel" in choices)
    choices = {**DEFAULT_CHOICES, **(choices or {})}
    user = catalog.label_instances(as_columns(table))  # a renting row shows its instance's GPU and fabric
    n = len(next(iter(user.values())))
    blank = {name: (blank_cells(user[name]) if name in user else np.ones(n, dtype=bool)) for name in MAPPING_COLUMNS}
    searched = dict(blank)
    # a blank sequence_parallel follows tp (it never loses in this model, Korthikanti Sec. 4.2.2) unless
    # the caller asks to search it
    searched["sequence_parallel"] = blank["sequence_parallel"] & search_sp
    sp_follows_tp = blank["sequence_parallel"] & ~search_sp
    filled = dict(user)
    for name in MAPPING_COLUMNS:
        if name not in user:
            filled[name] = np.zeros(n) if name == "recompute" else np.ones(n)
        elif blank[name].any():
            col = user[name]
            filled[name] = np.where(blank[name], "none" if name == "recompute" else 1, col) if col.dtype.kind in "OUS" \
                else np.where(blank[name], 1.0, col.astype(np.float64))
    _, floats = prepare(filled)
    if check_rows is not None and check_rows.any():
        try:
            check_layout(floats if check_rows.all() else {k: v[check_rows] for k, v in floats.items()})
        except InputError as exc:
            exc.row = int(np.flatnonzero(check_rows)[exc.row])
            raise
    # what infeasible_reason reads is kept where the caller asks for the reasons (or for everything)
    outputs = None if outputs is None else frozenset(outputs)
    reasons = outputs is None or "infeasible_reason" in outputs
    keep = None if outputs is None else outputs | (REASON_COLUMNS if reasons else frozenset())
    economics = needed_models(ECONOMICS_MODELS, keep)
    # each row's blank-pattern as one small integer: bit i set where MAPPING_COLUMNS[i] is searched
    pattern = np.zeros(n, dtype=np.intp)
    for bit, name in enumerate(MAPPING_COLUMNS):
        if searched[name].any():
            pattern |= searched[name].astype(np.intp) << bit
    if not pattern.any():
        # every mapping given: the table runs through every module as it is, once, chunk by chunk
        merged = run_models(_given_mapping(floats, None, sp_follows_tp), cal, DESIGN_MODELS + MAPPING_MODELS + economics,
                            keep)
        tried = np.ones(n)
    else:
        floats = run_models(floats, cal, DESIGN_MODELS)  # once per design, gathered into every candidate
        encoded = {name: (encode(name, np.asarray(list(v))) if name in CATEGORIES else np.asarray(v, dtype=np.float64))
                   for name, v in choices.items()}
        merged, tried = _best_mappings(floats, pattern, encoded, sp_follows_tp, cal)
        # one winner per row, in row order: the design's own columns join it for the economics
        merged = run_models({**floats, **merged}, cal, economics, keep)  # once per design, on its chosen mapping
    out = dict(user)
    for name, value in merged.items():
        if name not in user or name in MAPPING_COLUMNS or name not in CATEGORIES:
            out[name] = value
    for name in CATEGORIES:
        if name in user and name not in MAPPING_COLUMNS:
            out[name] = user[name]
    out["recompute"] = np.asarray(CATEGORIES["recompute"], dtype=object)[merged["recompute"].astype(np.intp)]
    out.update(rental_labels(merged))
    out["n_mappings_tried"] = tried - (merged[LOST_RULE] > 0)  # a fallback candidate was not a mapping tried
    if reasons:
        out["infeasible_reason"] = infeasible_reason(merged)
    out.pop(LOST_RULE, None)
    return out


def needed_models(models: tuple[Model, ...], outputs: Iterable[str] | None) -> tuple[Model, ...]:
    """The modules of ``models`` (in data-flow order) that ``outputs`` need, directly or through a later
    module's inputs; all of them where ``outputs`` is None."""
    if outputs is None:
        return models
    need, keep = set(outputs), []
    for model in reversed(models):
        if need & set(model.provides):
            keep.append(model)
            need |= set(model.requires)
    return tuple(reversed(keep))


def _given_mapping(floats: Columns, rows: np.ndarray | None, sp_follows_tp: np.ndarray) -> Columns:
    """The mapping columns of ``rows`` as given (``rows`` None: every row, with the design's columns too),
    as :func:`enumerate_mappings` gives them when nothing is searched: a blank sequence_parallel follows tp."""
    if rows is None:
        cand, follows = dict(floats), sp_follows_tp
    else:
        cand, follows = {name: floats[name][rows] for name in MAPPING_COLUMNS}, sp_follows_tp[rows]
    if follows.any():
        tp_splits = (cand["tp"] > 1) * 1.0
        cand["sequence_parallel"] = tp_splits if follows.all() else np.where(follows, tp_splits, cand["sequence_parallel"])
    n = len(cand["tp"])
    cand[LOST_RULE] = np.broadcast_to(np.float64(0.0), (n,))  # a given mapping is a real candidate
    return cand


def _best_mappings(floats: Columns, pattern: np.ndarray, encoded: Mapping[str, np.ndarray], sp_follows_tp: np.ndarray,
                   cal: Calibration | None) -> tuple[Columns, np.ndarray]:
    """Each row's best candidate, in row order: (the mapping modules' columns, candidates tried). Rows are
    grouped by their blank-pattern (``pattern``: a few distinct values, not rows); a row with nothing
    searched is its own one candidate."""
    n = len(pattern)
    tried = np.zeros(n)
    parts: list[tuple[np.ndarray, Columns]] = []  # (rows, their winners' columns)
    for g in np.flatnonzero(np.bincount(pattern)):
        rows = np.flatnonzero(pattern == g)
        cols = [name for bit, name in enumerate(MAPPING_COLUMNS) if g >> bit & 1]
        # candidates enumerated CANDIDATE_BUDGET at a time, evaluated in slices of whole rows that stay in cache
        pieces = iter_mappings(floats, rows, cols, encoded, sp_follows_tp) if cols else \
            [(rows, _given_mapping(floats, rows, sp_follows_tp))]
        for owner, cand in pieces:
            tried += np.bincount(owner, minlength=n)
            if len(owner) > 1 and np.any(owner[1:] < owner[:-1]):  # fallbacks come last: into row order
                order = np.argsort(owner, kind="stable")
                owner = owner[order]
                cand = {k: v[order] for k, v in cand.items()}
            edges = _row_edges(owner, MAX_JOINED_ROWS)
            for lo, hi in zip(edges[:-1], edges[1:]):
                idx = owner[lo:hi]
                # each candidate's design columns; a column constant over the table enters as its one value
                joined = {name: floats[name][:1] if is_constant(floats[name]) else floats[name][idx]
                          for name in _CANDIDATE_INPUTS if name in floats}
                joined.update({k: v[lo:hi] for k, v in cand.items()})
                work = {k: np.broadcast_to(v, idx.shape) for k, v in run_models(joined, cal, MAPPING_MODELS).items()}
                work = _mark_lost(work)
                pick = _best(work, idx) if cols else slice(None)
                parts.append((idx[pick], {name: v[pick] for name, v in work.items()}))
    if len(parts) == 1 and len(parts[0][0]) == n:
        return parts[0][1], tried  # one slice of every row: already in row order
    merged = {name: np.empty(n, dtype=v.dtype) for name, v in parts[0][1].items()}
    for winners, columns in parts:  # scattered into row order
        for name, v in columns.items():
            merged[name][winners] = v
    return merged, tried
