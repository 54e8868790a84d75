"""What a run records about itself: ``run.json``, and the metadata every Parquet file of the run carries.

:func:`run_metadata` is the ``dse.*`` metadata of every part and of ``pareto.parquet`` (the space's hash,
seed, sampler, objectives, constraints and the versions of what ran); :func:`run_json` is ``run.json`` as
of now (written at the start, every few seconds while batches run, and at the end); :func:`units` names
the unit of each model column, from ``objectives.METRICS``.
"""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from dse import __version__
from dse.spec import Spec

__all__ = ["run_metadata", "run_json", "units", "versions", "git_commit"]


def versions() -> dict[str, str]:
    """The versions of dse, Python and the libraries a run's numbers depend on."""
    import optuna
    import pyarrow
    import ray

    out = {"dse": __version__, "python": platform.python_version(), "numpy": np.__version__,
           "pandas": pd.__version__, "pyarrow": pyarrow.__version__, "optuna": optuna.__version__,
           "ray": ray.__version__}
    try:
        import objectives

        out["objectives"] = getattr(objectives, "__version__", "unknown")
    except ImportError:
        pass
    return out


def git_commit() -> str | None:
    """The commit of the checkout dse runs from (None outside a git checkout)."""
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def units(columns: list[str]) -> dict[str, str]:
    """Column -> its unit and meaning, for the model's columns among ``columns`` (none without the model)."""
    try:
        import objectives

        metrics = objectives.METRICS
    except ImportError:
        return {}
    return {c: metrics[c] for c in columns if c in metrics}


def run_metadata(spec: Spec) -> dict[str, Any]:
    """The ``dse.*`` metadata every Parquet file of a run carries (a part adds its batch, units and record)."""
    s = spec.search
    return {
        "space_hash": spec.space_hash, "space": spec.name, "seed": s.seed, "sampler": s.sampler,
        "batch_size": s.batch_size, "versions": versions(),
        "objectives": [{"metric": o.metric, "direction": o.direction} for o in spec.objectives],
        "constraints": [c.text for c in spec.constraints],
    }


def run_json(spec: Spec, ran_with: Mapping[str, str], **fields: Any) -> dict[str, Any]:
    """``run.json``: the space as given and resolved, its hash, seed and sampler, the versions that ran
    (``ran_with``, from :func:`versions`), then ``fields`` (the commit, the status, the counters and
    timings as of now)."""
    return {
        "dse_version": __version__,
        "spec_source": spec.source,
        "spec_text": spec.text or yaml.safe_dump(dict(spec.raw), sort_keys=False),
        "spec": spec.resolved(),
        "space_hash": spec.space_hash,
        "seed": spec.search.seed,
        "sampler": spec.search.sampler,
        "versions": dict(ran_with),
        **fields,
    }
