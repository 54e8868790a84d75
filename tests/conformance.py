"""The conformance checks every model module must pass, training's (tests/test_model_conformance.py) and
serving's (tests/test_serving_conformance.py) alike (like Optuna's shared sampler tests)."""

from __future__ import annotations

import numpy as np


def stages(models, work: dict, cal) -> list[tuple[object, dict]]:
    """The work table as each of ``models`` sees it: ``work`` (the prepared inputs) plus every earlier
    module's outputs, each a copy."""
    work = dict(work)
    seen = []
    for model in models:
        seen.append((model, {k: np.array(v) for k, v in work.items()}))
        work.update(model(work, cal))
    return seen


def check_conforms(model, work: dict, cal, every: int, rtol: float) -> None:
    """``model`` reads only the columns it declares (an undeclared one raises KeyError), returns exactly those
    it declares as float or bool columns of the table's length, never writes to its inputs (they are
    read-only), and gives for every ``every``-th row alone the numbers it gives in the batch (within ``rtol``)."""
    only_required = {k: work[k] for k in model.requires}
    before = {k: v.copy() for k, v in only_required.items()}
    for v in only_required.values():
        v.flags.writeable = False  # a write to an input raises
    out = model(only_required, cal)  # __call__ checks that outputs == declared outputs
    assert set(out) == set(model.provides)
    n = len(work["n_gpus"])
    for k, v in out.items():
        assert np.shape(v) == (n,), k
        assert np.asarray(v).dtype.kind in "fb", k
    for k, v in before.items():
        np.testing.assert_array_equal(only_required[k], v)
    for i in range(0, n, every):  # batch == row by row
        single = model({k: v[i:i + 1] for k, v in only_required.items()}, cal)
        for k in out:
            np.testing.assert_allclose(single[k], np.asarray(out[k])[i:i + 1], rtol=rtol, equal_nan=True, err_msg=k)
