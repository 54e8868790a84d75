"""`dse sweep SPACE.yaml` (or `dse sweep --resume RUN_DIR`): search a space, write every design and the front.

The space is validated before any work (a mistake is one line and exit 2). Designs are scored on Ray
actors: an embedded local Ray by default, an existing cluster with ``--address auto`` or
``--address ray://host:port`` (a cluster with token authentication on is joined with its token, from
``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``), or in this process with ``--no-ray``. Results go to
``results/<space>-<time>/`` (``--out`` to choose); ``--resume`` continues a stopped run without
re-evaluating its finished trials.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from dse.errors import UserError

if TYPE_CHECKING:
    from dse.store import RunStore

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="which design to build or rent: the Pareto front of a space (spaces/*.yaml) and a recommendation",
                       description=__doc__)
    p.add_argument("space", nargs="?", help="the space file, e.g. spaces/default.yaml")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR (its space is stored there)")
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (default: results/<space>-<time>)")
    p.add_argument("--results", default="results", metavar="DIR", help="where new run directories go (default: results)")
    p.add_argument("--trials", type=int, metavar="N", help="designs to evaluate (overrides search.trials)")
    p.add_argument("--seed", type=int, metavar="N", help="sampler seed (overrides search.seed)")
    p.add_argument("--workers", type=int, metavar="N", help="Ray actors (default: the CPUs Ray offers)")
    p.add_argument("--address", metavar="ADDR", help="join a Ray cluster: 'auto', 'host:port' or 'ray://host:port' "
                   "(its token from RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)")
    p.add_argument("--no-ray", action="store_true", help="evaluate in this process (tiny runs)")
    p.add_argument("--quiet", action="store_true", help="no progress line and no front table")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dse.space import Space
    from dse.spec import load_spec
    from dse.sweep import run as sweep
    from dse.sweep.progress import Progress, front_text

    if bool(args.space) == bool(args.resume):
        raise UserError("give a space file, or --resume RUN_DIR (not both)", where="dse sweep")
    if args.workers is not None and args.workers < 1:
        raise UserError("must be at least 1", where="--workers")
    from dse.spec.parse import MAX_SEED, MAX_TRIALS

    if args.trials is not None and not 1 <= args.trials <= MAX_TRIALS:
        raise UserError(f"must be a whole number from 1 to {MAX_TRIALS:,}, not {args.trials}", where="--trials")

    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        raise UserError(f"must be a whole number from 0 to {MAX_SEED}, not {args.seed}", where="--seed")
    if args.out is not None and not str(args.out).strip():
        raise UserError("is empty; give a directory for the run (or leave --out out: results/<space>-<time>)",
                        where="--out")
    if args.no_ray and args.address:
        raise UserError("--no-ray and --address exclude each other", where="--address")
    spec = None
    if args.space:
        spec = load_spec(args.space)
        if args.seed is not None:
            spec = spec.with_search(seed=args.seed)
    elif args.seed is not None:
        raise UserError("a resumed run keeps its seed", where="--seed")
    progress = Progress(enabled=not args.quiet)
    result = sweep(spec, run_dir=args.out, results=args.results, resume=args.resume, use_ray=not args.no_ray,
                   workers=args.workers, address=args.address, trials=args.trials, progress=progress)
    if not args.quiet:
        from dse.store import RunStore

        info = RunStore(result.run_dir).read_run()
        space = Space(spec) if spec is not None else None
        objectives = {o["metric"]: o["direction"] for o in info["spec"]["objectives"]}
        design = space.design_columns if space is not None else list(info["spec"]["cluster"])
        if info["spec"].get("facility_mw") is not None:  # the budget used beside each design (dse.spec.facility)
            design = [*design, "n_gpus_billed", "facility_power_peak_mw", "facility_budget_frac"]
        try:
            import objectives as model

            mapping = ["dp", *dict.fromkeys((*model.MAPPING_COLUMNS, *getattr(model, "SERVING_MAPPING_COLUMNS", ())))]
        except ImportError:
            mapping = []
        print(f"\nPareto front: {len(result.front)} designs "
              f"({result.n_admissible} of {result.n_trials} feasible and within the constraints)"
              + _facility_text(info["spec"]))
        print(front_text(result.front, objectives, design, mapping))
        _print_why_infeasible(RunStore(result.run_dir))
        _print_recommendation(result.run_dir)
        print(f"\nresults: {result.run_dir}/ (report.html, report.md, trials/*.parquet, pareto.parquet, run.json, study.journal)")
    if result.status == "stopped":
        print(f"dse sweep: stopped after {result.n_trials} designs; continue with: dse sweep --resume {result.run_dir}",
              file=sys.stderr)
        return 130
    return 0


def _print_why_infeasible(store: RunStore) -> None:
    """The closing table's last lines: how many distinct designs (as the report counts them: dse.report.data
    load_run) each kind of reason kept off the front, every kind counted."""
    from dse.report.data import infeasible_kinds, load_run, more_kinds

    try:
        run = load_run(store.root)
    except Exception:  # the sweep's results stand without it
        return
    kinds = infeasible_kinds(run.trials, constraints=run.info.get("spec", {}).get("constraints") or [])
    if kinds:
        total = sum(k[1] for k in kinds)
        print(f"\nwhy designs were infeasible: {total:,} of {len(run.trials):,} distinct designs (numbers as #):")
        for kind, n, example in kinds[:SHOWN_KINDS]:
            print(f"  {n:>7,}  {kind}   e.g. {example}")
        more = more_kinds(kinds, SHOWN_KINDS)
        if more:
            print(f"  {more}: {'; '.join(k[0] for k in kinds[SHOWN_KINDS:])}")


#: the kinds of reason the closing lines list before saying how many more there are
SHOWN_KINDS = 6


def _print_recommendation(run_dir) -> None:
    """The design to buy, why, and the best design per GPU (and provider, instance): dse.report.buyer."""
    from dse.report.buyer import terminal_text
    from dse.report.data import load_run

    try:
        text = terminal_text(load_run(run_dir))
    except Exception as exc:  # the sweep's results stand without it
        print(f"dse sweep: recommendation skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return
    print("\n" + text)


def _facility_text(spec: dict) -> str:
    """'; facility 20 MW, racks at most 130 kW' where the space gives them (dse.spec.facility), else ''."""
    said = [f"facility {spec['facility_mw']:g} MW" if spec.get("facility_mw") is not None else "",
            f"racks at most {spec['rack_kw_max']:g} kW" if spec.get("rack_kw_max") is not None else ""]
    return "".join(f"; {s}" for s in said if s)
