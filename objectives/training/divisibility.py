"""Which mappings Megatron runs: every divisibility and schedule rule, in one place.

Each rule is a named, vectorized test over columns (True where the mapping passes) with the mapping columns
it reads and a short human reason. Three users share them: :class:`objectives.training.layout.Layout` counts the
broken ones (``con_layout``) and names the first (``layout_rule``, its ``code``); the mapping search
(:mod:`objectives.mapping`) runs each rule as soon as the columns it reads exist, so that a candidate
broken early never multiplies the next column's choices; and :func:`input_errors` gives ``dse evaluate``
the rules whose breaking makes a fixed mapping a bad input.

What is an input error and what an infeasible row:

- *Input errors* (``input_error=True``): a fixed mapping whose tp*pp*cp does not divide n_gpus, or whose
  dp*micro_batch does not divide global_batch. Then dp or the micro-batches per step are not whole
  numbers: the row does not describe a job at all, and ``dse evaluate`` stops with one line (exit 2).
- *Infeasible rows with a reason*: everything Megatron refuses at run time for a job that is well defined
  (heads tp cannot split, a pipeline split the stack cannot place, an interleaved schedule it refuses).

Pipeline splits (:func:`pipeline_split`): Megatron-Core (``megatron-core``, 2025+) places layers in one of
the forms its flags accept, and the model takes the most balanced one, counting the embedding (first
stage) and the loss (last stage) as one layer each, as ``account_for_*_in_pipeline_split`` does:

- even: L a multiple of pp*vp (megatron/core/transformer/transformer_block.py, get_num_layers_to_build);
- the embedding and/or the loss counted as a layer (``--account-for-embedding-in-pipeline-split``,
  ``--account-for-loss-in-pipeline-split``): L+1 or L+2 a multiple of pp*vp, the first (last) stage
  holding one layer fewer (Llama 3.1 405B: 126+2 = 128 over pp 16 = 8 a stage, 7 on the first and last);
- explicit first and last stage layer counts (``--decoder-first-pipeline-num-layers`` /
  ``--decoder-last-pipeline-num-layers``; columns ``pp_first_layers`` / ``pp_last_layers``, blank = the
  model picks): each a multiple of vp, the other layers even over the middle stages in multiples of vp
  (transformer_config.py __post_init__, "Uneven PP"; 80 layers over pp 3 as 27 + 27 + 26).

Megatron-Core 0.14+ also takes a free-form ``--pipeline-model-parallel-layout``; the model does not search
it (a split none of the three forms gives is refused, the conservative side). Megatron-Core r0.8
(``megatron-core-2024``) and Megatron-LM 2021 split evenly only (L % pp == 0, L/pp % vp == 0;
Megatron-LM v2.6 megatron/model/transformer.py, core_v0.8.0 arguments.py).

Interleaving (``vp`` > 1): the schedule needs a pipeline, pp > 2 in Megatron-LM 2021 (v2.6
arguments.py) and pp > 1 with ``--overlap-p2p-comm`` (on by default) since; and the micro-batches per step a multiple of
pp: Megatron-LM 2021 and Megatron-Core r0.8 assert ``num_microbatches % pp == 0`` (schedules.py), and
Megatron-Core 2025+ needs ``microbatch_group_size_per_vp_stage`` (default pp, the depth-first schedule the
model charges) within [pp, m] and m divided by it, or leaving >= pp
(schedules.py forward_backward_pipelining_with_interleaving). A larger group accepts any m >= pp but holds
more micro-batches in flight than memory.py charges, so the model keeps the default group.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from objectives.calibration import STACKS

__all__ = ["Rule", "Job", "RULES", "RULES_BY_CODE", "SEARCH_RULES", "PIPELINE_TRAITS", "CP_MIN_SEQ_LEN", "number_text",
           "divides", "whole", "pipeline_split", "broken_rules", "input_errors"]

CP_MIN_SEQ_LEN = 16384


@dataclass(frozen=True)
class PipelineTraits:
    uneven_split: bool  # takes the account-for-embedding/loss and first/last-stage forms (Megatron-Core 0.11+)
    interleave_min_pp: int  # least pp with an interleaved schedule


#: what each stack's pipeline accepts (sources in the module docstring); pytorch-fsdp has no pipeline of its
#: own, and is given the even split
PIPELINE_TRAITS: dict[str, PipelineTraits] = {
    "megatron-core": PipelineTraits(True, 2),
    "megatron-core-2024": PipelineTraits(False, 2),
    "megatron-2021": PipelineTraits(False, 3),
    "pytorch-fsdp": PipelineTraits(False, 2),
}
assert tuple(PIPELINE_TRAITS) == STACKS
_UNEVEN = np.array([PIPELINE_TRAITS[s].uneven_split for s in STACKS])
_MIN_PP = np.array([PIPELINE_TRAITS[s].interleave_min_pp for s in STACKS], dtype=np.float64)


def whole(a: np.ndarray, q: np.ndarray) -> np.ndarray:
    """True where a > 0 and the quotient q (= b / a, already computed) is a whole number."""
    return (a > 0) & (q == np.floor(q))


def divides(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """True where a > 0 divides b exactly (float columns holding integers)."""
    return whole(a, b / a)


class Split:
    """A pipeline split: decoder layers on the busiest, the first and the last stage; ``code`` 0 where the
    stack accepts it, else the code of the split rule it breaks."""

    def __init__(self, busiest, first, last, code):
        self.busiest, self.first, self.last, self.code = busiest, first, last, code


def pipeline_split(n_layers, pp, vp, first=None, last=None, stack=None) -> Split:
    """The most balanced split of ``n_layers`` over pp stages of vp chunks the stack accepts (module doc).

    Balance counts the embedding and the loss as one layer each on the first and last stage; ties go to the
    even split, then the account-for forms, then explicit first/last counts. ``first`` / ``last``: the
    user's stage layer counts (NaN = not set); where either is set, only that split is considered.

    Where the even split exists no other form is more balanced (L and L+1 or L+2 are both multiples of
    pp*vp only for pp*vp <= 2, a tie; a first/last form moving layers off the ends adds at least one layer
    of vp to the middle): the other forms are computed only for the rows without it."""
    L, p, v = (np.asarray(x, dtype=np.float64) for x in (n_layers, pp, vp))
    shape = np.broadcast_shapes(L.shape, p.shape, v.shape, *(np.shape(x) for x in (first, last, stack) if x is not None))
    given = np.zeros(shape, dtype=bool)
    for x in (first, last):
        if x is not None:
            given = given | ~np.isnan(x)
    n = L / p
    even = whole(p * v, n / v) & ~given
    busiest = np.broadcast_to(n, shape)
    code = np.zeros(shape, dtype=np.intp)
    if even.all():
        return Split(busiest, busiest, busiest, code)
    rows = np.flatnonzero(~even.reshape(-1))

    def at(x, fill=np.nan):
        return np.full(len(rows), fill) if x is None else np.broadcast_to(np.asarray(x, dtype=np.float64), shape).reshape(-1)[rows]

    cols = (at(L), at(p), at(v), at(first), at(last), at(stack, 0.0))
    # candidates share a few (L, pp, vp, ...) combinations: compute each once where they pack into one key
    packed = np.stack([np.nan_to_num(x, nan=-1.0) + 1.0 for x in cols])
    if len(rows) > 64 and np.all((packed >= 0) & (packed < 4096) & (packed == np.floor(packed))):
        key = sum(x.astype(np.int64) << (12 * i) for i, x in enumerate(packed[:5])) + (packed[5].astype(np.int64) << 60)
        _, first_at, inverse = np.unique(key, return_index=True, return_inverse=True)
        cols = tuple(x[first_at] for x in cols)
    else:
        inverse = slice(None)
    b, f, la, c = (x[inverse] for x in _uneven(*cols[:5], _UNEVEN[cols[5].astype(np.intp)]))
    out = []
    for full, part in ((busiest, b), (busiest, f), (busiest, la), (code, c)):
        full = np.array(np.broadcast_to(full, shape)).reshape(-1)
        full[rows] = part
        out.append(full.reshape(shape))
    return Split(*out)


def _uneven(L, p, v, F, La, uneven):
    """:func:`pipeline_split` for rows without an even split (1-D columns of equal length)."""
    f_set, l_set = ~np.isnan(F), ~np.isnan(La)
    given = f_set | l_set
    pv = p * v
    one = p == 1
    options = []  # (accepted, cost, busiest, first, last), in the order ties prefer

    def option(ok, f, la, mid):
        f, la = np.where(one, L, f), np.where(one, L, la)
        mid = np.where(p >= 3, mid, 0.0)
        cost = np.where(one, L + 2.0, np.maximum(np.maximum(f, la) + 1.0, mid))
        options.append((ok, cost, np.maximum(np.maximum(f, la), mid), f, la))

    for emb, loss in ((1.0, 1.0), (1.0, 0.0), (0.0, 1.0)):  # embedding and/or loss counted as a layer
        k = (L + emb + loss) / p
        option(uneven & ~given & whole(pv, (L + emb + loss) / pv), k - emb, k - loss, k)
    # first and last stage layer counts the model picks: a*vp, b*vp, and j*vp on each middle stage
    q = L / v
    searched = uneven & ~given & whole(v, q)
    a2 = np.ceil(q / 2.0)
    option(searched & (p == 2) & (q >= 2), a2 * v, (q - a2) * v, 0.0)
    for dj in (-1.0, 0.0, 1.0, 2.0):  # the cost is least near j = q / p (a max of a rising and a falling term)
        j = np.floor(q / p) + dj
        r = q - (p - 2.0) * j
        a = np.ceil(r / 2.0)
        option(searched & (p >= 3) & (j >= 1) & (r >= 2), a * v, (r - a) * v, j * v)
    # the user's first / last stage layer counts; the other stages even (transformer_config.py "Uneven PP")
    Fv, Lv = np.where(f_set, F, 0.0), np.where(l_set, La, 0.0)
    middle_stages = p - f_set - l_set
    rest = L - Fv - Lv
    m = rest / np.maximum(middle_stages, 1.0)
    ok = (uneven & given & (middle_stages >= 0) & (~f_set | ((F > 0) & whole(v, F / v)))
          & (~l_set | ((La > 0) & whole(v, La / v)))
          & np.where(middle_stages == 0, rest == 0, (rest > 0) & whole(v, m / v)))
    option(ok, np.where(f_set, F, m), np.where(l_set, La, m), m)

    accepted = np.stack([o[0] for o in options])
    cost = np.where(accepted, np.stack([o[1] for o in options]), np.inf)
    pick = np.argmin(cost, axis=0)[None]
    busiest, f, la = (np.take_along_axis(np.stack([o[i] for o in options]), pick, 0)[0] for i in (2, 3, 4))
    found = accepted.any(axis=0)
    fallback = np.ceil(L / pv) * v  # what a free-form layout would place; only ranks the least-infeasible
    code = np.where(found, 0, np.where(given, np.where(uneven, SPLIT_GIVEN, SPLIT_GIVEN_STACK),
                                       np.where(uneven, SPLIT_UNEVEN, SPLIT_EVEN)))
    return np.where(found, busiest, fallback), np.where(found, f, fallback), np.where(found, la, fallback), code


class Job:
    """A (partial) mapping's columns with the design's, and what the rules derive from them, each once."""

    def __init__(self, cols: Mapping[str, np.ndarray]):
        self.c = cols

    def __getitem__(self, name: str) -> np.ndarray:
        return self.c[name]

    @cached_property
    def model_parallel(self):
        return self.c["tp"] * self.c["pp"] * self.c["cp"]

    @cached_property
    def dp(self):
        return self.c["n_gpus"] / self.model_parallel

    @cached_property
    def n_microbatches(self):
        return self.c["global_batch"] / (self.dp * self.c["micro_batch"])

    @cached_property
    def moe(self):
        return self.c["moe_experts"] > 0

    @cached_property
    def interleaved(self):
        return self.c["vp"] > 1

    @cached_property
    def split(self) -> Split:
        c = self.c
        return pipeline_split(c["n_layers"], c["pp"], c["vp"], c.get("pp_first_layers"), c.get("pp_last_layers"),
                              c.get("stack"))


@dataclass(frozen=True)
class Rule:
    code: int  # the ``layout_rule`` value of a row whose first broken rule this is (1, 2, ...)
    name: str
    kind: str  # the reason's kind: layout, schedule (search: a pruning rule of the mapping search alone)
    reads: tuple[str, ...]  # mapping columns it reads (the search runs it once they all exist)
    ok: Callable[[Job], np.ndarray]
    says: Callable[[Job], list]  # the reason, as parts: text and number columns
    needs: str  # what it asks, for "no candidate mapping passes ..." ({column} = the design's value)
    input_error: bool = False  # a fixed mapping breaking it is bad input (exit 2), not an infeasible row
    column: str = ""  # the column an input error names


SPLIT_EVEN, SPLIT_UNEVEN, SPLIT_GIVEN, SPLIT_GIVEN_STACK = 10, 11, 12, 13


def _stack_name(j: Job):
    return np.asarray(STACKS, dtype=object)[np.asarray(j.c.get("stack", np.zeros(1)), dtype=np.intp)]


def _blank(x):
    return np.where(np.isnan(x), "-", number_text(x))


RULES: tuple[Rule, ...] = (
    Rule(1, "gpus", "layout", ("tp", "pp", "cp"), lambda j: whole(j.model_parallel, j.dp),
         lambda j: ["tp*pp*cp = ", j.model_parallel, " does not divide n_gpus ", j["n_gpus"]],
         "tp*pp*cp divides n_gpus {n_gpus}", True, "n_gpus"),
    Rule(2, "batch", "layout", ("tp", "pp", "cp", "micro_batch"),
         lambda j: whole(j.dp * j["micro_batch"], j.n_microbatches),
         lambda j: ["dp*micro_batch = ", j.dp * j["micro_batch"], " does not divide global_batch ", j["global_batch"]],
         "dp*micro_batch divides global_batch {global_batch} (n_gpus {n_gpus})", True, "global_batch"),
    Rule(3, "heads", "layout", ("tp",), lambda j: divides(j["tp"], j["n_heads"]),
         lambda j: ["tp ", j["tp"], " does not divide n_heads ", j["n_heads"]], "tp divides n_heads {n_heads}"),
    Rule(4, "kv_heads", "layout", ("tp",),
         lambda j: divides(j["tp"], j["n_kv_heads"]) | divides(j["n_kv_heads"], j["tp"]),
         lambda j: ["tp ", j["tp"], " and n_kv_heads ", j["n_kv_heads"], ": neither divides the other"],
         "tp and n_kv_heads {n_kv_heads} divide one another"),
    # context parallelism splits the sequence into 2*cp chunks (Megatron-Core context parallelism, load balance)
    Rule(5, "seq", "layout", ("cp",), lambda j: divides(2.0 * j["cp"], j["seq_len"]),
         lambda j: ["2*cp = ", 2.0 * j["cp"], " does not divide seq_len ", j["seq_len"]],
         "2*cp divides seq_len {seq_len}"),
    Rule(6, "ep_dense", "layout", ("ep",), lambda j: j.moe | (j["ep"] == 1),
         lambda j: ["ep ", j["ep"], " on a dense model (no experts to split)"], "ep 1 on a dense model"),
    Rule(7, "ep_experts", "layout", ("ep",), lambda j: ~j.moe | divides(j["ep"], j["moe_experts"]),
         lambda j: ["ep ", j["ep"], " does not divide moe_experts ", j["moe_experts"]],
         "ep divides moe_experts {moe_experts}"),
    # experts are carved out of dp*cp, or of tp*dp*cp with expert tensor parallelism 1 (Megatron-Core MoE
    # parallel folding): ep divides tp*dp*cp = n_gpus / pp
    Rule(8, "ep_ranks", "layout", ("ep", "pp"), lambda j: ~j.moe | divides(j["ep"], j["n_gpus"] / j["pp"]),
         lambda j: ["ep ", j["ep"], " does not divide tp*dp*cp ", j["n_gpus"] / j["pp"]],
         "ep divides tp*dp*cp"),
    Rule(9, "interleave_pipeline", "schedule", ("vp", "pp"),
         lambda j: ~j.interleaved | (j["pp"] >= _MIN_PP[np.asarray(j.c.get("stack", np.zeros(1)), dtype=np.intp)]),
         lambda j: ["interleaved vp ", j["vp"], " needs pp >= ",
                    _MIN_PP[np.asarray(j.c.get("stack", np.zeros(1)), dtype=np.intp)], " on ", _stack_name(j),
                    " (pp ", j["pp"], ")"],
         "an interleaved schedule has a pipeline"),
    Rule(SPLIT_EVEN, "split_even", "layout", ("pp", "vp"), lambda j: j.split.code != SPLIT_EVEN,
         lambda j: ["n_layers ", j["n_layers"], " is not a multiple of pp*vp ", j["pp"] * j["vp"], " (",
                    _stack_name(j), " splits layers evenly)"],
         "pp*vp divides n_layers {n_layers}"),
    Rule(SPLIT_UNEVEN, "split_uneven", "layout", ("pp", "vp"), lambda j: j.split.code != SPLIT_UNEVEN,
         lambda j: ["no split of ", j["n_layers"], " layers over pp ", j["pp"], " x vp ", j["vp"],
                    " that Megatron-Core takes (even; embedding/loss counted as layers; first/last stage counts)"],
         "Megatron-Core splits n_layers {n_layers} over pp x vp"),
    Rule(SPLIT_GIVEN, "split_given", "layout", ("pp", "vp"), lambda j: j.split.code != SPLIT_GIVEN,
         lambda j: ["pp_first_layers ", _blank(j["pp_first_layers"]), " / pp_last_layers ",
                    _blank(j["pp_last_layers"]), " over pp ", j["pp"], " x vp ", j["vp"], " of ", j["n_layers"],
                    " layers: each must be a multiple of vp, the rest even over the middle stages in multiples of vp"],
         "pp_first_layers / pp_last_layers leave an even middle"),
    Rule(SPLIT_GIVEN_STACK, "split_given_stack", "layout", ("pp", "vp"),
         lambda j: j.split.code != SPLIT_GIVEN_STACK,
         lambda j: [_stack_name(j), " splits layers evenly: it takes no pp_first_layers / pp_last_layers"],
         "a stack that takes pp_first_layers / pp_last_layers"),
    Rule(14, "interleave_few_microbatches", "schedule", ("vp", "pp", "tp", "cp", "micro_batch"),
         lambda j: ~j.interleaved | (j.n_microbatches >= j["pp"]),
         lambda j: ["interleaved vp ", j["vp"], " needs >= pp micro-batches (m ", j.n_microbatches, " < pp ",
                    j["pp"], ")"],
         "an interleaved schedule has >= pp micro-batches"),
    Rule(15, "interleave_microbatch_multiple", "schedule", ("vp", "pp", "tp", "cp", "micro_batch"),
         lambda j: ~j.interleaved | (j.n_microbatches < j["pp"]) | divides(j["pp"], j.n_microbatches),
         lambda j: ["interleaved vp ", j["vp"], " needs micro-batches in multiples of pp (m ", j.n_microbatches,
                    ", pp ", j["pp"], ")"],
         "an interleaved schedule has micro-batches in multiples of pp"),
    # MosaicML llm-foundry (the pytorch-fsdp stack) shards with FSDP and has no tensor, pipeline or context
    # parallelism (llm-foundry's parallelism config: FSDP only, as its published runs used)
    Rule(16, "fsdp_data_parallel", "layout", ("tp", "pp", "cp"),
         lambda j: (np.asarray(j["stack"]) != STACKS.index("pytorch-fsdp")) | ((j["tp"] == 1) & (j["pp"] == 1) & (j["cp"] == 1)),
         lambda j: ["pytorch-fsdp runs data parallelism only (tp ", j["tp"], ", pp ", j["pp"], ", cp ", j["cp"], ")"],
         "tp = pp = cp = 1 on pytorch-fsdp"),
)
#: pruning rules of the mapping search alone (documented, not tuned), run only where the search picks the
#: column they prune (a given value is kept): tensor parallelism inside the scale-up domain (Narayanan et al. SC'21, Sec. 3.3
#: takeaway #1), its groups tiling the domain (tp 16 in a 72-GPU NVL72 rack would leave groups straddling two
#: racks, their all-reduces on the NIC); context parallelism only for sequences of 16K tokens and more; sequence parallelism only
#: with tp > 1 (Megatron turns it off at tp 1)
SEARCH_RULES: tuple[Rule, ...] = (
    Rule(101, "tp_scaleup", "search", ("tp",), lambda j: divides(j["tp"], np.maximum(j["scaleup_size"], 1.0)),
         lambda j: ["tp ", j["tp"], " does not tile the scale-up domain ", j["scaleup_size"]],
         "tp dividing the scale-up domain {scaleup_size}"),
    Rule(102, "cp_long", "search", ("cp",), lambda j: (j["cp"] == 1) | (j["seq_len"] >= CP_MIN_SEQ_LEN),
         lambda j: ["cp ", j["cp"], " below 16K tokens"], "cp 1 below 16K tokens"),
    # a necessary condition of rule 1, run as soon as tp and pp exist (on given columns too)
    Rule(104, "gpus_tp_pp", "layout", ("tp", "pp"), lambda j: divides(j["tp"] * j["pp"], j["n_gpus"]),
         lambda j: ["tp*pp = ", j["tp"] * j["pp"], " does not divide n_gpus ", j["n_gpus"]],
         "tp*pp divides n_gpus {n_gpus}"),
    Rule(103, "sp_tp", "search", ("sequence_parallel", "tp"),
         lambda j: (j["sequence_parallel"] == 0) | (j["tp"] > 1),
         lambda j: ["sequence parallelism at tp 1"], "sequence parallelism only with tp > 1"),
)
RULES_BY_CODE: dict[int, Rule] = {r.code: r for r in RULES + SEARCH_RULES}


def broken_rules(job: Job, rules: tuple[Rule, ...] = RULES) -> tuple[np.ndarray, np.ndarray]:
    """(number of broken rules, code of the first broken one, 0 where none), over whole columns."""
    count = first = None
    for rule in reversed(rules):  # a handful of rules, each over whole columns
        bad = ~rule.ok(job)
        count = bad.astype(np.uint8) if count is None else count + bad
        first = np.where(bad, rule.code, 0 if first is None else first)
    return count.astype(np.float64), first.astype(np.float64)


def input_errors(job: Job) -> tuple[Rule, np.ndarray] | None:
    """The first input-error rule a row breaks, with the rows that break it (None if none)."""
    for rule in RULES:
        if rule.input_error:
            bad = ~rule.ok(job)
            if bad.any():
                return rule, bad
    return None


def number_text(x, spec: str = "g") -> np.ndarray:
    """Numbers as short text (format ``spec``), formatted once per distinct value (not per row)."""
    values, inverse = np.unique(np.asarray(x, dtype=np.float64), return_inverse=True)
    return np.array([format(v, spec) for v in values], dtype=object)[inverse.reshape(-1)]
