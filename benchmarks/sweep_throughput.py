"""Throughput of the sweep engine end to end: cluster designs scored per second, and where the time goes.

Runs the same NSGA-II sweep with 1 and with 2 Ray actors on one embedded Ray (started once, outside the
timing) and prints designs per second over the batch loop -- sampler (ask, tell), the design table, Ray
transfer and the model's mapping search on the actors, the Parquet part and the Optuna journal, run.json
and the progress line -- and a breakdown per design. The stages add up to the loop's wall time. A told
batch is recorded and sent to the writer process (record, send), which writes its Parquet part and appends
its journal records while the driver asks the next batch; the driver then waits for them (write) and
updates the progress line (progress) while the actors score that next batch. The space is ``spaces/default.yaml`` with its HBM
bandwidth made continuous and the NIC bandwidth added as a continuous what-if, so proposals do not repeat,
and the design cache is off: every trial is scored by the model. Not a test; prints figures.

    .venv/bin/python benchmarks/sweep_throughput.py                 # 1 and 2 actors, 4096 designs, best of 2 runs
    .venv/bin/python benchmarks/sweep_throughput.py --trials 8192 --batch 512 --workers 1 2
    .venv/bin/python benchmarks/sweep_throughput.py --toy           # engine overhead only (a trivial model)
    .venv/bin/python benchmarks/sweep_throughput.py --interleaved --trials 32768   # 1 and 2 actors, batch by batch
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dse.spec import parse_spec  # noqa: E402
from dse.sweep import run  # noqa: E402

STAGES = ["ask", "table", "score", "tell", "record", "send", "write", "progress"]


def toy_model(table):
    """A trivial vectorized model with the real output's shape: measures the engine alone."""
    n = max(len(v) for v in table.values() if np.ndim(v) > 0)
    hbm = np.asarray(table["gpu_hbm_tbyte_s"], dtype=np.float64)
    nic = np.asarray(table["nic_gbyte_s"], dtype=np.float64)
    n_gpus = np.asarray(table["n_gpus"], dtype=np.float64)
    days = 1e4 / (n_gpus * hbm ** 0.3 * nic ** 0.1)
    out = {k: np.broadcast_to(np.asarray(v), (n,)) for k, v in table.items()}
    out.update(time_to_train_days=days, run_cost_usd=days * 24 * n_gpus * (2 + hbm / 4 + nic / 50),
               power_mw=n_gpus * 1.4e-3, facility_power_peak_mw=n_gpus * 1.9e-3, con_memory=np.full(n, -0.1),
               feasible=np.ones(n, dtype=bool))
    return out


def _spin(_=None) -> float:
    t = time.perf_counter()
    x = 0
    for i in range(3_000_000):
        x += i * i
    return time.perf_counter() - t


def cpu_check() -> float:
    """How many CPUs this machine gives two busy processes right now (2.0 on two idle cores; less when
    something else runs): the same loop alone, then in two processes at once."""
    import multiprocessing as mp

    alone = _spin()
    with mp.get_context("fork").Pool(2) as pool:
        both = pool.map(_spin, [0, 1])
    return 2 * alone / max(both)


def _model_work(table) -> float:
    import objectives

    t = time.perf_counter()
    search = objectives.search_serving if objectives.is_serving_table(table) else objectives.search_mapping
    for _ in range(3):
        search(table)
    return time.perf_counter() - t


def model_check(spec) -> float:
    """How the model itself scales on this machine right now: the mapping search of 256 designs, alone and
    then in two processes at once (2.0 where two cores run it at full speed). No engine, no Ray: the ceiling
    of any actor speed-up here."""
    import multiprocessing as mp

    from dse.cluster import keep_freed_memory
    from dse.space import Space
    from dse.study.samplers import sample_uniform

    space = Space(spec)
    rng = np.random.RandomState(0)
    table = space.table([{n: sample_uniform(d, rng) for n, d in space.distributions.items()} for _ in range(256)])
    with mp.get_context("fork").Pool(2, initializer=keep_freed_memory) as pool:  # as the actors run it
        pool.map(_model_work, [table, table])  # warm
        alone = pool.apply(_model_work, (table,))
        both = pool.map(_model_work, [table, table])
    return 2 * alone / max(both)


def interleaved(spec, score) -> None:
    """1 and 2 actors batch by batch in one sweep: even batches scored by one actor, odd batches by both,
    so that a drift of the host's speed (minutes here) hits both alike. Prints the designs per second of
    each kind of batch (the wall time of the loop's iteration that scores it: ask, table, submit, the
    previous batch's commit, score, tell, record, send) and their ratio."""
    import dse.sweep.loop
    from dse.cluster import RayPool, unpack

    class AlternatingPool(RayPool):
        def __init__(self, score_fn, **_):
            super().__init__(score_fn, 2, where="embedded Ray, batches alternating 1 and 2 actors")
            self.batches = 0

        def submit(self, table):
            one = self.batches % 2 == 0
            self.batches += 1
            if not one:
                waiting = super().submit(table)
            else:
                ref = self._actors[0].score.remote(table)  # the whole batch on one actor

                def waiting():
                    packed, seconds = self._ray.get(ref)
                    self.actor_seconds += seconds
                    return unpack(packed)

            def wait():
                before = self.actor_seconds
                out = waiting()
                model.append(self.actor_seconds - before)  # actor seconds of this batch
                return out

            return wait

    times: list[dict[str, float]] = []
    model: list[float] = []
    real_open_pool = dse.sweep.loop.open_pool
    dse.sweep.loop.open_pool = AlternatingPool
    try:
        with tempfile.TemporaryDirectory() as tmp:
            result = run(spec, evaluate_fn=score, run_dir=Path(tmp) / "run", use_ray=True, cache_designs=False,
                         on_batch=lambda i, bt: times.append(dict(bt)))
    finally:
        dse.sweep.loop.open_pool = real_open_pool
    n = spec.search.batch_size
    # iteration b: start(b) (ask, table, submit), commit(b-1) (write, progress), tell(b) (score, tell), send(b)
    wall = [sum(times[b][k] for k in ("ask", "table", "score", "tell", "record", "send"))
            + times[b - 1]["write"] + times[b - 1]["progress"] for b in range(2, len(times))]
    rate = {b: n / w for b, w in zip(range(2, len(times)), wall)}
    one = [r for b, r in rate.items() if b % 2 == 0]
    two = [r for b, r in rate.items() if b % 2 == 1]
    pairs = [rate[b + 1] / rate[b] for b in rate if b % 2 == 0 and b + 1 in rate]
    print(f"interleaved, one sweep of {result.n_trials} designs in batches of {n} (the first two not counted):")
    print(f"   1 actor:  {np.median(one):8.1f} designs/s per batch (median of {len(one)}; "
          f"{min(one):.0f}-{max(one):.0f})")
    print(f"  2 actors:  {np.median(two):8.1f} designs/s per batch (median of {len(two)}; "
          f"{min(two):.0f}-{max(two):.0f})")
    per = {k: np.median([model[b] for b in rate if b % 2 == k]) / n * 1e6 for k in (0, 1)}
    print(f"model on the actors, median per design: {per[0]:.0f} us (1 actor), {per[1]:.0f} us of actor time "
          f"(2 actors: each design {per[1] / per[0]:.2f}x as slow, so at most {2 * per[0] / per[1]:.2f}x from the model alone)")
    print(f"speed-up 2 actors / 1 actor: {np.median(two) / np.median(one):.2f}x (ratio of medians); "
          f"batch pairs {np.percentile(pairs, 25):.2f}-{np.percentile(pairs, 75):.2f}x (middle half), "
          f"median {np.median(pairs):.2f}x")


def bench_space(trials: int, batch: int, space: str | None = None) -> dict:
    """spaces/default.yaml with continuous HBM and NIC bandwidth; or ``space`` as it is (a serving space:
    its mapping searched per design), NSGA-II either way."""
    raw = copy.deepcopy(yaml.safe_load((ROOT / (space or "spaces/default.yaml")).read_text()))
    raw["name"] = "throughput"
    if space is None:
        raw["cluster"]["gpu_hbm_tbyte_s"] = {"min": 3.0, "max": 8.0}
        raw["cluster"]["nic_gbyte_s"] = {"min": 12.5, "max": 100.0}
    raw["search"].update(trials=trials, batch_size=batch, sampler="nsga2", seed=0)
    return raw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--chunks-per-worker", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2,
                    help="runs of each configuration, interleaved (1, 2, 1, 2 actors); the best of each is kept")
    ap.add_argument("--toy", action="store_true", help="trivial model: the engine's own overhead")
    ap.add_argument("--space", help="a space file instead (e.g. spaces/serving-llama3.3-70b.yaml, as it is)")
    ap.add_argument("--no-ray", action="store_true", help="also time the in-process pool")
    ap.add_argument("--interleaved", action="store_true",
                    help="one sweep whose batches alternate between 1 and 2 actors (robust to a drifting host)")
    args = ap.parse_args()

    import ray

    raw = bench_space(args.trials, args.batch, args.space)
    if args.toy:
        from dse.spec import Vocabulary

        v = Vocabulary.from_objectives()
        spec = parse_spec(raw, source="benchmark", vocab=v)
        score = toy_model
    else:
        spec = parse_spec(raw, source="benchmark")
        score = None
    what = args.space or "spaces/default.yaml, continuous HBM and NIC bandwidth"
    print(f"space: {what}; NSGA-II; {args.trials} designs in "
          f"batches of {args.batch}; design cache off; {os.cpu_count()} CPUs; model: {'toy' if args.toy else 'the mapping search'}")
    before = cpu_check()
    print(f"CPUs available to two busy processes before: {before:.2f} of {os.cpu_count()}")
    if not args.toy:
        print(f"the model alone in two processes at once: {model_check(spec):.2f}x one process "
              "(the ceiling of a 2-actor speed-up on this machine now)")
    t0 = time.perf_counter()
    ray.init(num_cpus=max(max(args.workers), os.cpu_count() or 1), include_dashboard=False, logging_level="ERROR")
    print(f"Ray start: {time.perf_counter() - t0:.1f} s (once, not in the figures)\n")
    if args.interleaved:
        interleaved(spec, score)
        ray.shutdown()
        return

    configs = [("in-process", None)] if args.no_ray else []
    configs += [(f"{w} actor{'s' if w > 1 else ''}", w) for w in args.workers]
    rates: dict[str, float] = {}
    costs: dict[str, tuple[dict[str, float], float, float]] = {}  # stage costs of each configuration's best run
    rounds: dict[str, list[float]] = {}  # every run's rate, in order
    for attempt in range(args.repeat):
        for label, workers in configs:
            with tempfile.TemporaryDirectory() as tmp:
                t_batches: list[float] = []
                result = run(spec, evaluate_fn=score, run_dir=Path(tmp) / "run", use_ray=workers is not None,
                             workers=workers, chunks_per_worker=args.chunks_per_worker, cache_designs=False,
                             on_batch=lambda i, bt, t_batches=t_batches: t_batches.append(sum(bt.values())))
            loop = sum(t_batches)
            rate = result.n_trials / loop
            tm = result.timings
            per = {k: tm.get(k, 0.0) / result.n_trials * 1e6 for k in STAGES}
            model = tm.get("model", 0.0) / result.n_trials * 1e6
            writer = tm.get("writer", 0.0) / result.n_trials * 1e6
            if rate > rates.get(label, 0.0):
                rates[label], costs[label] = rate, (per, model, writer)
            rounds.setdefault(label, []).append(rate)
            print(f"{label:>10}: {rate:8.1f} designs/s over the batch loop ({result.n_trials} designs, {loop:.1f} s; "
                  f"pool start {tm.get('startup', 0):.1f} s; run {attempt + 1} of {args.repeat})")
            parts = "  ".join(f"{k} {per[k]:.0f}" for k in STAGES)
            print(f"{'':>12}us per design: {parts}")
            serial = per["ask"] + per["table"] + per["tell"] + per["record"] + per["send"]
            print(f"{'':>12}model on the actors: {model:.0f} us of actor time per design (/{workers or 1} = "
                  f"{model / (workers or 1):.0f} us wall); driver: {serial:.0f} us between batches (ask, table, "
                  f"tell, record, send), then {per['progress']:.0f} us (progress) while the "
                  f"actors score; writer: {writer:.0f} us per design (part, journal), from the send on\n")
    print("best of each: " + ", ".join(f"{k} {v:,.0f} designs/s" for k, v in rates.items()))
    if len(args.workers) >= 2 and "1 actor" in rates:
        w = max(args.workers)
        print(f"speed-up {w} actors / 1 actor: {rates[f'{w} actors'] / rates['1 actor']:.2f}x")
        each = [b / a for a, b in zip(rounds["1 actor"], rounds[f"{w} actors"])]  # runs minutes apart, not hours
        print(f"speed-up run by run: {', '.join(f'{r:.2f}' for r in each)}x (median {np.median(each):.2f}x)")
        per, model, writer = costs["1 actor"]
        serial = per["ask"] + per["table"] + per["tell"] + per["record"] + per["send"]
        driver = per["progress"]
        cores = os.cpu_count() or 1
        # per design, 1 actor: the driver's serial part, then the model (the driver's progress line and the
        # writer run beside it). w actors: the serial part (the writer works on an idle core meanwhile), then
        # the model split w ways, shared with the driver's progress line and what is left of the writer's part
        rest = driver + max(writer - serial, 0.0)
        bound = (serial + max(model, rest)) / (serial + max(model / w, (model + rest) / cores, rest))
        print(f"what the engine's own costs allow (1-actor run, per design: model {model:.0f} us, driver {serial:.0f} "
              f"us between batches and {driver:.0f} us beside the actors, writer {writer:.0f} us; the model as fast "
              f"as alone, {cores} free cores): {bound:.2f}x")
    ray.shutdown()
    print(f"CPUs available to two busy processes after: {cpu_check():.2f} of {os.cpu_count()} "
          "(below 2, another load shared the cores and the figures above are low)")


if __name__ == "__main__":
    main()
