"""`dse validate [CSV]`: the model against published measured training runs (``--kind serving``: the
serving model against published serving measurements, dse/commands/validate_serving.py).

Without CSV it uses the runs shipped in the package (objectives/catalog/training_runs.csv, with their
sources). Prints, per source and overall, predicted against measured tokens/s per GPU and the mean
absolute percentage error, and the coverage of the 80% prediction intervals on left-out sources: the
share of each source's runs whose measurement falls inside the interval derived without that source
(from the stored leave-one-source-out residuals, objectives/catalog/loso_residuals.csv; see
objectives.fitting.interval_fit), with the median half-width. Then the in-sample error per GPU generation and per
GPU within Megatron-Bridge, and the held-out coverage per generation (per GPU for a generation validated by
one source): intervals derived without the run's source, and, from the leave-one-generation-out residuals
(objectives/catalog/logo_residuals.csv, objectives.fitting.generation_check), the runs predicted without their
generation inside intervals derived without it and inside the shipped, generation-widened ones.
``--out`` writes the per-row table.
"""

from __future__ import annotations

import argparse

from dse.tables import describe_input_error, display_path, read_runs, write_table
from objectives import InputError

__all__ = ["add_parser", "run"]

REQUIRED = ("source_key", "measured_tokens_per_s_per_gpu")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="how far off the model is: its error on published training runs (or serving measurements)",
                       description=__doc__)
    p.add_argument("csv", nargs="?", default=None,
                   help="runs to check (default: training_runs.csv, or serving_runs.csv with --kind serving, shipped "
                        "with the package)")
    p.add_argument("--kind", choices=("training", "serving"), default="training",
                   help="training runs (default) or serving measurements (dse/commands/validate_serving.py)")
    p.add_argument("--out", help="write the per-row table (Parquet or .csv)")
    p.add_argument("--calibration", metavar="FILE", help="a calibration file (dse calibrate) instead of the shipped one")
    p.set_defaults(run=run)


def _coverage() -> str:
    """The 80% intervals' coverage on left-out sources, and per generation (with the leave-one-generation-out
    residuals where they are stored), from the stored residuals (no refit)."""
    from objectives.fitting.coverage import coverage_text, generation_coverage_text
    from objectives.fitting.interval_fit import (
        LOGO_RESIDUALS_PATH,
        RESIDUALS_PATH,
        read_generation_residuals,
        read_residuals,
    )

    res, logo = read_residuals(), read_generation_residuals()
    stored = RESIDUALS_PATH.name + ("" if logo is None else f", {LOGO_RESIDUALS_PATH.name}")
    return ("Prediction intervals (80%), each source left out of the factors' fit and of the intervals' "
            f"derivation ({RESIDUALS_PATH.name}):\n" + coverage_text(res, logo) + "\n\n"
            f"Held-out coverage per GPU generation ({stored}):\n" + generation_coverage_text(res, logo))


def _error_table(title: str, keys, result) -> list[str]:
    """Per value of ``keys`` (a Series aligned with ``result``): runs, sources, MAPE, worst, bias (in-sample)."""
    from objectives.fitting.validation import source_of

    g = result.groupby(keys.to_numpy(), sort=False)
    head = f"{title:<12} {'runs':>5} {'sources':>7} {'MAPE':>7} {'worst':>7} {'bias':>7}"
    lines = [head, "-" * len(head)]
    sources = result["source_key"].map(source_of)
    for name, part in g:
        lines.append(f"{name:<12} {len(part):>5} {sources[part.index].nunique():>7} {part['ape'].mean():>7.1%} "
                     f"{part['ape'].max():>7.1%} {part['signed_error'].mean():>+7.1%}")
    return lines


def _generation_errors(result) -> str:
    """The in-sample error per GPU generation, and per GPU within Megatron-Bridge (the source of every
    Blackwell run)."""
    import numpy as np
    import pandas as pd

    from objectives.fitting.validation import source_of
    from objectives.training.intervals import GENERATIONS, generation

    code = generation(result["model_gpu_fp8_tflop_s"].to_numpy(dtype=np.float64),
                      result["model_gpu_fp4_tflop_s"].to_numpy(dtype=np.float64)).astype(int)
    order = np.argsort(code, kind="stable")
    ordered = result.iloc[order]
    gens = pd.Series(np.asarray(GENERATIONS, dtype=object)[code[order]], index=ordered.index)
    lines = _error_table("generation", gens, ordered)
    bridge = ordered[(ordered["source_key"].map(source_of) == "megatron-bridge").to_numpy()]
    if len(bridge):
        bridge = bridge.sort_values(["gpu"], key=lambda g: g.map(lambda x: (x.startswith("h"), x)), kind="stable")
        lines += ["", "megatron-bridge, per GPU (in-sample):"] + _error_table("gpu", bridge["gpu"], bridge)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "kind", "training") == "serving":
        from dse.commands.validate_serving import run_serving

        return run_serving(args)
    from dse.commands.calibrate import load_calibration
    from objectives.fitting.validation import RUNS_PATH, predict, source_of, summarize  # pandas: only this command

    cal = load_calibration(getattr(args, "calibration", None))
    path = args.csv or str(RUNS_PATH)
    runs = read_runs(path, REQUIRED)
    try:
        result = predict(runs, cal)
    except InputError as exc:
        raise describe_input_error(exc, path) from None
    s = summarize(result)
    shown = display_path(path)
    print(f"{len(result)} published runs from {len(s.per_source)} sources ({shown})")
    print()
    header = f"{'source':<24} {'runs':>5} {'measured':>10} {'predicted':>10} {'MAPE':>7} {'worst':>7} {'bias':>7}"
    print(header)
    print("-" * len(header))
    sources = result["source_key"].map(source_of)
    means = result.groupby(sources)[["measured_tokens_per_s_per_gpu", "predicted_tokens_per_s_per_gpu"]].median()
    for name, row in s.per_source.iterrows():
        print(f"{name:<24} {int(row['rows']):>5} {means.loc[name, 'measured_tokens_per_s_per_gpu']:>10.0f} "
              f"{means.loc[name, 'predicted_tokens_per_s_per_gpu']:>10.0f} {row['mape']:>7.1%} {row['max_ape']:>7.1%} {row['bias']:>+7.1%}")
    print("-" * len(header))
    print(f"MAPE of tokens/s per GPU: {s.mape_source_weighted:.1%} with each source weighing the same, "
          f"{s.mape_row_weighted:.1%} over rows; Narayanan et al. SC'21 Table 1: {s.mape_paper:.1%}; "
          f"worst source: {s.worst_source} {s.worst_source_mape:.1%}")
    print("(measured and predicted columns are the median tokens/s per GPU of each source's runs)")
    print()
    print(_generation_errors(result))
    if args.csv is None and getattr(args, "calibration", None) is None:  # the stored residuals are the shipped fit's
        print()
        print(_coverage())
    if args.out:
        write_table({c: result[c].to_numpy() for c in result.columns}, args.out)
        print(f"wrote {args.out}")
    return 0
