"""`dse validate --kind serving [CSV]`: the serving model against published serving measurements.

Without CSV it uses the measurements shipped in the package (objectives/catalog/serving_runs.csv, with
their sources in serving_runs.md). Prints per source and per GPU the error of output tokens/s per GPU, of
TPOT (mean inter-token latency) and TTFT where the source measured them, and the headline figures: the
mean absolute percentage error of output tokens/s per GPU with every source weighing the same, and of TPOT
on the online rows; then the coverage of the 80% prediction intervals on measurements the model was not
fitted to: each model architecture's measurements against the intervals derived without it, from the stored
held-out residuals (objectives/catalog/serving_loso_residuals.csv; objectives/serving/interval_fit.py).
"""

from __future__ import annotations

from dse.tables import describe_input_error, display_path, read_runs, write_table
from objectives import InputError

__all__ = ["run_serving"]

REQUIRED = ("source_key", "measured_output_tokens_per_s_per_gpu", "input_len", "output_len")


def _pct(v) -> str:
    return "     -" if v != v else f"{v:>6.1%}"


def run_serving(args) -> int:
    from objectives.serving.validation import RUNS_PATH, predict, speculative_summary, summarize  # pandas: only here

    path = args.csv or str(RUNS_PATH)
    runs = read_runs(path, REQUIRED, "serving ")
    try:
        result = predict(runs)
    except InputError as exc:
        raise describe_input_error(exc, path) from None
    s = summarize(result)
    shown = display_path(path)
    rows = int(s.per_source["rows"].sum())
    extra = len(result) - rows
    more = f", and {extra} validation-only speculative-decoding runs (below)" if extra else ""
    print(f"{rows} published serving measurements from {len(s.per_source)} sources ({shown}){more}")
    print()
    header = (f"{'source':<27} {'gpu':<14} {'rows':>5} {'measured':>9} {'predicted':>9} {'MAPE':>6} {'bias':>7} "
              f"{'TPOT':>6} {'TTFT':>6}")
    print(header)
    print("-" * len(header))
    for source, row in s.per_source.iterrows():
        mine = result[result["source_key"] == source]
        for gpu, part in mine.groupby("gpu"):
            print(f"{source:<27} {gpu:<14} {len(part):>5} {part['measured_output_tokens_per_s_per_gpu'].median():>9.0f} "
                  f"{part['predicted_output_tokens_per_s_per_gpu'].median():>9.0f} {part['tokens_ape'].mean():>6.1%} "
                  f"{part['tokens_error'].mean():>+7.1%} {_pct(part['tpot_ape'].mean())} {_pct(part['ttft_ape'].mean())}")
        print(f"{source:<27} {'all':<14} {int(row['rows']):>5} {'':>9} {'':>9} {row['mape']:>6.1%} {row['bias']:>+7.1%} "
              f"{_pct(row['tpot_mape'])} {_pct(row['ttft_mape'])}")
    print("-" * len(header))
    print(f"MAPE of output tokens/s per GPU: {s.mape_source_weighted:.1%} with each source weighing the same, "
          f"{s.mape_row_weighted:.1%} over rows; TPOT on the {s.online_rows} online rows (mean ITL at a fixed "
          f"request rate): {s.tpot_mape_online:.1%}, TTFT {s.ttft_mape_online:.1%}")
    print("(measured and predicted: median output tokens/s per GPU; TPOT and TTFT: MAPE where the source measured them)")
    spec = speculative_summary(result)
    if spec is not None:
        _print_speculative(spec, result)
    if args.csv is None:  # the stored residuals are the shipped measurements'
        from objectives.serving.heldout import RESIDUALS_PATH, read_residuals
        from objectives.serving.interval_fit import coverage_text

        print()
        print("Prediction intervals (80%), each model architecture left out of the factors' fit and of the intervals' "
              f"derivation ({RESIDUALS_PATH.name}):")
        print(coverage_text(read_residuals()))
    if args.out:
        write_table({c: result[c].to_numpy() for c in result.columns}, args.out)
        print(f"wrote {args.out}")
    return 0


def _print_speculative(spec, result) -> None:
    """The validation-only speculative-decoding runs, per source and speculation, and their line."""
    from objectives.serving.validation import validation_only

    mine = result[validation_only(result)]
    print()
    print("Speculative decoding (validation only: not in the fit; acceptance from objectives/catalog/speculative.yaml):")
    header = f"{'source':<27} {'spec_decode':<14} {'rows':>5} {'measured':>9} {'predicted':>9} {'MAPE':>6} {'bias':>7} {'TPOT':>6}"
    print(header)
    print("-" * len(header))
    for (source, how), row in spec.iterrows():
        print(f"{source:<27} {how:<14} {int(row['rows']):>5} {row['measured']:>9.1f} {row['predicted']:>9.1f} "
              f"{row['mape']:>6.1%} {row['bias']:>+7.1%} {_pct(row['tpot_mape'])}")
    print("-" * len(header))
    speculating = mine["spec_decode"].fillna("none").astype(str).isin(["", "none"])
    print(f"speculative decoding: {len(mine)} runs, MAPE of output tokens/s per GPU {mine['tokens_ape'].mean():.1%} "
          f"(bias {mine['tokens_error'].mean():+.1%}; {int((~speculating).sum())} speculating "
          f"{mine.loc[~speculating, 'tokens_ape'].mean():.1%}, {int(speculating.sum())} without "
          f"{mine.loc[speculating, 'tokens_ape'].mean():.1%})")
