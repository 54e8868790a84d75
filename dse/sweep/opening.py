"""Opening a run: a new run directory or a stopped one to resume, and a check that the model takes the space.

:func:`preflight` scores a few designs of a new run's space in this process before anything is written,
so that a space the model rejects is one line and exit 2. :func:`open_run` creates the run directory, or
opens one to resume, with the space it was started with (validated again against today's model) and its
stored ``run.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml

from dse.errors import UserError
from dse.problem import ScoreFn, check_engines, is_serving_space, model_errors
from dse.space import Space
from dse.spec import Spec, Vocabulary, parse_spec
from dse.store import RunStore
from dse.study import uniform_params

__all__ = ["preflight", "open_run"]


def preflight(spec: Spec, score: ScoreFn, n: int = 8) -> None:
    """Score ``n`` uniformly drawn designs in this process before a run starts, so that a space the model
    rejects (a fixed column out of range, say; a serving space whose engines run on none of its GPUs,
    :func:`dse.problem.check_engines`) is one line and exit 2 before anything is written."""
    space = Space(spec)
    if is_serving_space(space):
        check_engines(spec)
    params = uniform_params(space.distributions, n, spec.search.seed)
    with np.errstate(all="ignore"), model_errors(spec):  # the error, if any, is the message, not the arithmetic
        dict(score(space.table(params)))


def open_run(spec: Spec | None, resume: str | Path | None, run_dir: str | Path | None, results: str | Path,
             vocab: Vocabulary | None) -> tuple[RunStore, Spec, dict[str, Any]]:
    """The run directory, the space and the stored run.json (empty for a new run)."""
    if resume is None:
        if spec is None:
            raise ValueError("run() needs a spec or resume=RUN_DIR")
        return RunStore.create(run_dir, results=results, name=spec.name), spec, {}
    store = RunStore.open(resume)
    info = store.read_run()
    if spec is None:  # the space as it was given, validated again against today's model
        text, seed = info.get("spec_text"), info.get("seed")
        try:
            raw = yaml.safe_load(text) if isinstance(text, str) else None
        except yaml.YAMLError:
            raw = None
        if not isinstance(raw, dict) or not (seed is None or (isinstance(seed, int) and not isinstance(seed, bool))):
            raise UserError("run.json does not hold the run's space (spec_text) and seed as dse writes them: not a run "
                            "directory dse wrote, or edited since", where=str(store.run_json))
        spec = parse_spec(raw, source=info.get("spec_source", str(store.run_json)), text=text,
                          default_name=info.get("spec", {}).get("name", "space"), vocab=vocab)
        if seed is not None and seed != spec.search.seed:
            spec = spec.with_search(seed=seed)
    if info.get("space_hash") and info["space_hash"] != spec.space_hash:
        raise UserError("the space changed since this run started; start a new run", where="--resume")
    return store, spec, info
