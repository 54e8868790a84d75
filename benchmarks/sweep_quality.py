"""Search quality: NSGA-II's front after 5% of the grid's evaluations against the exact front.

1. The exact front: ``spaces/small.yaml`` swept exhaustively (``sampler: grid``, every design scored once).
2. NSGA-II on the same space with a budget of 5% of the grid's size, for 5 seeds.
3. For each seed, the hypervolume of NSGA-II's front (its feasible, constraint-meeting designs) divided
   by the exact front's, with one reference point for all: the exact front's worst value in each objective
   plus 10% of the front's range (the usual choice; a far reference point would flatter every sampler).
   Objectives are normalized by the exact front's range first, so both count alike.

Prints the ratio per seed, the mean and the seed-to-seed spread (min, max, standard deviation), and the
same for random sampling with the same budget as a baseline. Not a test; prints figures.

    .venv/bin/python benchmarks/sweep_quality.py                       # 5% budget, seeds 0-4
    .venv/bin/python benchmarks/sweep_quality.py --budget 0.05 --seeds 0 1 2 3 4 --batch 8 --workers 2
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dse.space import Space  # noqa: E402
from dse.spec import load_spec  # noqa: E402
from dse.store import RunStore  # noqa: E402
from dse.store.pareto import hypervolume, nondominated_mask, to_minimization  # noqa: E402
from dse.sweep import run  # noqa: E402


def front_points(frame: pd.DataFrame, objectives: dict[str, str]) -> np.ndarray:
    ok = frame[frame["admissible"].astype(bool)]
    F = to_minimization(ok[list(objectives)].to_numpy(dtype=np.float64), list(objectives.values()))
    F = F[np.isfinite(F).all(axis=1)]
    return np.unique(F[nondominated_mask(F)], axis=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--space", default=str(ROOT / "spaces" / "small.yaml"))
    ap.add_argument("--budget", type=float, default=0.05, help="share of the grid's size NSGA-II may evaluate")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--batch", type=int, default=8, help="NSGA-II population (designs per ask)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()

    spec = load_spec(args.space)
    space = Space(spec)
    objectives = {o.metric: o.direction for o in spec.objectives}
    grid = space.grid_size()
    budget = max(args.batch, int(round(args.budget * grid)))
    use_ray = not args.no_ray
    if use_ray:
        import ray

        ray.init(num_cpus=max(2, args.workers), include_dashboard=False, logging_level="ERROR")

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        exact_run = run(spec.with_search(sampler="grid", trials=grid, batch_size=256), run_dir=Path(tmp) / "grid",
                        use_ray=use_ray, workers=args.workers)
        exact = front_points(RunStore(exact_run.run_dir).read_trials(), objectives)
        t_grid = time.perf_counter() - t0
        lo, hi = exact.min(axis=0), exact.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        ref = (hi - lo) / span + 0.1  # in normalized units: the front spans [0, 1] per objective
        hv_exact = hypervolume((exact - lo) / span, ref)
        print(f"space {spec.source}: {grid} designs on the grid, exact front of {len(exact)} designs "
              f"({t_grid:.0f} s to sweep); objectives {objectives}")
        print(f"budget: {budget} evaluations = {100 * budget / grid:.1f}% of the grid; NSGA-II population {args.batch}, "
              f"{budget // args.batch} generations\n")

        results: dict[str, list[float]] = {"nsga2": [], "random": []}
        for sampler in ("nsga2", "random"):
            for seed in args.seeds:
                s = spec.with_search(sampler=sampler, trials=budget, batch_size=args.batch, seed=seed)
                r = run(s, run_dir=Path(tmp) / f"{sampler}-{seed}", use_ray=use_ray, workers=args.workers)
                F = front_points(RunStore(r.run_dir).read_trials(), objectives)
                hv = hypervolume((F - lo) / span, ref) if len(F) else 0.0
                ratio = hv / hv_exact
                results[sampler].append(ratio)
                print(f"{sampler:>6} seed {seed}: hypervolume {100 * ratio:6.2f}% of exact "
                      f"(front {len(F)} designs; {r.n_scored} distinct designs scored of {r.n_trials} trials)")
            v = np.array(results[sampler])
            print(f"{sampler:>6}: mean {100 * v.mean():.2f}%  min {100 * v.min():.2f}%  max {100 * v.max():.2f}%  "
                  f"std {100 * v.std(ddof=1) if len(v) > 1 else 0.0:.2f} points over {len(v)} seeds\n")
        v = np.array(results["nsga2"])
        print(f"NSGA-II at {100 * budget / grid:.1f}% of the grid: mean {100 * v.mean():.2f}% of the exact hypervolume "
              f"over {len(v)} seeds ({'meets' if v.mean() >= 0.98 else 'misses'} the 98% bar), spread "
              f"{100 * v.min():.2f}-{100 * v.max():.2f}% (std {100 * v.std(ddof=1) if len(v) > 1 else 0.0:.2f} points); "
              f"{int((v < 0.98).sum())} of {len(v)} seeds below 98%")
    if use_ray:
        ray.shutdown()


if __name__ == "__main__":
    main()
