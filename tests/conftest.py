"""Shared fixtures: one local Ray for the whole session, and a toy model for the engine's mechanics.

The toy model (:func:`toy_score`) is a vectorized function of a design table with the shape of the real
one (objective columns, a ``con_*`` column, ``feasible``), so the engine tests do not depend on the
analytical models. It is pickled by value so Ray actors can run it without importing this file.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from dse.spec import Vocabulary

TOY_GPUS = {"g1": (1.0, 1.0, 40.0), "g2": (2.0, 2.6, 80.0), "g3": (3.5, 5.0, 96.0)}  # speed, price, memory


def toy_vocabulary() -> Vocabulary:
    """The columns, metrics and catalog ids the toy model understands."""
    return Vocabulary(
        input_columns=frozenset({"model", "gpu", "n_gpus", "global_batch", "knob", "train_tokens", "tp", "pp",
                                 "micro_batch", "recompute", "precision", "gpu_hbm_gb"}),
        metrics={"time_s": "s; time", "cost_usd": "USD; cost", "power_mw": "MW; power", "hbm_used_gb": "GB; memory",
                 "con_memory": "1; memory overflow", "feasible": "bool; fits"},
        mapping_columns=("tp", "pp", "micro_batch", "recompute"),
        catalog_ids={"gpu": tuple(TOY_GPUS), "model": ("toy-1b", "toy-7b")},
        labels={"recompute": ("none", "selective", "full"), "precision": ("bf16", "fp8")},
        integer_columns=frozenset({"n_gpus", "global_batch", "tp", "pp", "micro_batch"}),
    )


def toy_score(table):
    """Vectorized toy model: time falls and cost rises with GPUs; the knob trades power for speed."""
    n = max((len(v) for v in table.values() if np.ndim(v) > 0), default=1)
    gpu = np.broadcast_to(np.asarray(table["gpu"], dtype=object), (n,))
    speed = np.array([TOY_GPUS[g][0] for g in gpu])
    price = np.array([TOY_GPUS[g][1] for g in gpu])
    memory = np.array([TOY_GPUS[g][2] for g in gpu])
    n_gpus = np.broadcast_to(np.asarray(table["n_gpus"], dtype=np.float64), (n,))
    knob = np.broadcast_to(np.asarray(table.get("knob", 1.0), dtype=np.float64), (n,))
    size = 7.0 if table.get("model", "toy-1b") == "toy-7b" else 1.0
    time_s = 1e6 * size / (n_gpus ** 0.9 * speed * knob ** 0.5)
    cost = n_gpus * price * (1 + 0.1 * knob) + 0.001 * time_s
    power = n_gpus * 1e-3 * (0.5 + 0.2 * knob * speed)
    used = 600.0 * size / n_gpus ** 0.5 + 20
    con = (used - memory) / memory
    out = {k: np.broadcast_to(np.asarray(v), (n,)).copy() for k, v in table.items()}
    out.update(time_s=time_s, cost_usd=cost, power_mw=power, hbm_used_gb=used, con_memory=con, feasible=con <= 0,
               tp=np.ones(n, dtype=np.int64), pp=np.ones(n, dtype=np.int64))
    return out


class DyingScore:
    """toy_score whose actor process dies (os._exit) on its second call, once per marker file: Ray must
    restart the actor and retry the chunk."""

    def __init__(self, marker: str):
        self.marker = marker
        self.calls = 0

    def __call__(self, table):
        import os

        self.calls += 1
        if self.calls == 2 and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        return toy_score(table)


TOY_SPACE = {
    "name": "toy",
    "workload": {"model": "toy-1b", "global_batch": 512},
    "cluster": {"gpu": ["g1", "g2", "g3"], "n_gpus": {"min": 8, "max": 4096, "scale": "pow2"},
                "knob": {"min": 1.0, "max": 4.0, "step": 0.5}},
    "objectives": [{"metric": "time_s", "direction": "min"}, {"metric": "cost_usd", "direction": "min"}],
    "constraints": ["power_mw <= 10"],
    "search": {"sampler": "nsga2", "trials": 256, "batch_size": 64, "seed": 3},
}


@pytest.fixture(scope="session")
def vocab() -> Vocabulary:
    return toy_vocabulary()


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance for every test that needs Ray; shut down at the end of the session."""
    pytest.importorskip("ray")
    import ray
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    started = False
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        started = True
    yield ray
    if started:
        ray.shutdown()


#: the hypothesis profile every property test runs under: the same inputs on every run (derandomized, no
#: example database, no shrinking), a fixed number of them, and no deadline (a busy CI core is no failure).
#: ``max_examples`` is the number the spaces and design tables tests draw each (tests/test_hostile_input.py);
#: tests/test_hostile_files.py draws HOSTILE_EXAMPLES["yaml"] YAML texts (cheap: most end at the parser) and
#: HOSTILE_EXAMPLES["invocations"] command lines and damaged runs (each a sweep): 5,000 generated inputs a run.
HYPOTHESIS_PROFILE = "dse"
HOSTILE_EXAMPLES_PER_TEST = 1250
HOSTILE_EXAMPLES = {"spaces": HOSTILE_EXAMPLES_PER_TEST, "tables": HOSTILE_EXAMPLES_PER_TEST, "yaml": 2000,
                    "invocations": 500}

try:
    from hypothesis import HealthCheck, Phase, settings
except ImportError:  # the property tests skip themselves
    pass
else:
    settings.register_profile(HYPOTHESIS_PROFILE, derandomize=True, database=None, deadline=None,
                              max_examples=HOSTILE_EXAMPLES_PER_TEST, phases=[Phase.explicit, Phase.generate],
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.load_profile(HYPOTHESIS_PROFILE)

#: generated hostile inputs tried by tests/test_hostile_input.py, reported in the session summary
HOSTILE: dict = {"inputs": 0, "tracebacks": 0, "spaces": 0, "tables": 0, "yaml": 0, "invocations": 0, "rejected": 0,
                 "accepted": 0, "examples": []}


def pytest_terminal_summary(terminalreporter):
    generated = HOSTILE["spaces"] + HOSTILE["tables"] + HOSTILE["yaml"] + HOSTILE["invocations"]
    if generated:
        terminalreporter.write_line(
            f"hostile input (hypothesis profile {HYPOTHESIS_PROFILE!r}, derandomized, "
            f"{HOSTILE_EXAMPLES_PER_TEST} per test, {HOSTILE_EXAMPLES['yaml']} YAML texts, {HOSTILE_EXAMPLES['invocations']} "
            f"invocations): {generated} generated bad inputs ({HOSTILE['spaces']} spaces, "
            f"{HOSTILE['tables']} design tables, {HOSTILE['yaml']} YAML texts, {HOSTILE['invocations']} "
            f"invocations and damaged runs; {HOSTILE['rejected']} rejected in one line with exit 2, "
            f"{HOSTILE['accepted']} accepted and run), {HOSTILE['tracebacks']} tracebacks")


def evaluate_405b(**row):
    """Llama-3.1 405B on 16,384 H100s with a fixed mapping (the economics tests' reference design)."""
    import objectives

    base = dict(model="llama3.1-405b", gpu="h100-sxm", n_gpus=16384, global_batch=2048, seq_len=8192,
                tp=8, pp=16, micro_batch=1, train_tokens=15e12)
    base.update(row)
    return objectives.evaluate(base)
