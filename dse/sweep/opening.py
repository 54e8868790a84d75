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
        spec = parse_spec(yaml.safe_load(info["spec_text"]), source=info.get("spec_source", str(store.run_json)),
                          text=info["spec_text"], default_name=info.get("spec", {}).get("name", "space"), vocab=vocab)
        if info.get("seed") is not None and info["seed"] != spec.search.seed:
            spec = spec.with_search(seed=int(info["seed"]))
    if info.get("space_hash") and info["space_hash"] != spec.space_hash:
        raise UserError("the space changed since this run started; start a new run", where="--resume")
    return store, spec, info
