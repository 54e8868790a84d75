"""Llama-3.1 405B: how time-to-train and the run's cost move with the GPU system, fabric, oversubscription and storage.

    .venv/bin/python tools/economics_table.py [--gpus 16128] [--markdown] [--csv out.csv]

Scores a handful of cluster designs with ``objectives.search_mapping`` (each gets its best mapping) and
prints one row per design with the breakdown that explains each move: step time and MFU (the network),
checkpoints (write time, interval, storage units) and goodput, power, capital cost, the run's cost by part
and the lifetime cost. Every design differs from the baseline (first row) in one thing. The default 16,128 GPUs are 224 whole
NVL72 racks (or 2,016 8-GPU servers), with 2,016 sequences of 8,192 tokens a step (~16.5M tokens, Llama 3's
16M) so that data parallelism divides them. Systems are the catalog's (gpus.yaml
``system``): HGX/DGX B200 8-GPU servers, GB200 and GB300 NVL72 racks; the one 72-GPU domain of B200s is a
labelled what-if (``scaleup_size: 72``, NVLink switches priced per GPU).
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

import objectives

BASE = dict(model="llama3.1-405b", train_tokens=15e12, global_batch=2016, seq_len=8192, precision="bf16",
            gpu="b200", network="ib-ndr-400", oversubscription=1.0, storage="pfs-large", ckpt_mode="sync",
            cost_mode="owned")
#: label -> what differs from BASE
DESIGNS = {
    "DGX B200 8-GPU, NDR 400 1:1, pfs-large, sync": {},
    "  XDR 800 fabric (B200 NICs stay 400G)": {"network": "ib-xdr-800"},
    "  GB200 NVL72 racks": {"gpu": "gb200"},
    "  GB300 NVL72 racks on XDR 800": {"gpu": "gb300", "network": "ib-xdr-800"},
    "  what-if: B200 in 72-GPU NVLink domains": {"scaleup_size": 72.0},
    "  2:1 oversubscription": {"oversubscription": 2.0},
    "  storage pfs-small": {"storage": "pfs-small"},
    "  storage allflash-qlc": {"storage": "allflash-qlc"},
    "  storage pfs-hdd": {"storage": "pfs-hdd"},
    "  storage pfs-large x8 units": {"storage_units_min": 8.0},
    "  async checkpoints": {"ckpt_mode": "async"},
    "  cloud (rented)": {"cost_mode": "cloud"},
}
COLUMNS = {  # output column -> (header, scale)
    "tp": ("tp", 1), "pp": ("pp", 1), "dp": ("dp", 1),
    "step_time_s": ("step s", 1), "mfu": ("MFU", 1), "time_dp_comm_exposed_s": ("dp exp s", 1),
    "time_pp_comm_s": ("pp s", 1), "net_tiers": ("tiers", 1), "net_oversub_seen": ("oversub", 1),
    "storage_units": ("units", 1), "ckpt_write_s": ("ckpt write s", 1), "ckpt_stall_s": ("ckpt stall s", 1),
    "ckpt_interval_s": ("ckpt every s", 1), "goodput": ("goodput", 1),
    "time_to_train_ideal_days": ("ideal d", 1), "time_to_train_days": ("days", 1), "power_mw": ("MW", 1),
    "capex_usd": ("capex $M", 1e-6), "run_cost_compute_usd": ("compute $M", 1e-6),
    "run_cost_network_usd": ("network $M", 1e-6), "run_cost_storage_usd": ("storage $M", 1e-6),
    "run_cost_power_usd": ("power $M", 1e-6), "run_cost_facility_usd": ("facility $M", 1e-6),
    "run_cost_usd": ("run $M", 1e-6), "lifetime_cost_usd": ("lifetime $M", 1e-6), "usd_per_mtok": ("$/Mtok", 1),
}


def table(n_gpus: int) -> pd.DataFrame:
    rows = [{**BASE, "n_gpus": n_gpus, **change} for change in DESIGNS.values()]
    keys = sorted({k for r in rows for k in r})
    cols = {k: np.array([r.get(k, np.nan) for r in rows], dtype=object if k in (
        "model", "gpu", "network", "storage", "precision", "ckpt_mode", "cost_mode") else np.float64) for k in keys}
    out = objectives.search_mapping(cols)
    frame = pd.DataFrame({head: np.asarray(out[col], dtype=np.float64) * scale for col, (head, scale) in COLUMNS.items()})
    frame.insert(0, "design", list(DESIGNS))
    frame.insert(1, "feasible", out["feasible"])
    return frame


#: the README's columns: what moved, and why
MARKDOWN = ("design", "tp", "pp", "step s", "MFU", "units", "ckpt write s", "ckpt stall s", "ckpt every s", "goodput",
            "days", "MW", "capex $M", "compute $M", "network $M", "storage $M", "power $M", "facility $M", "run $M",
            "lifetime $M", "$/Mtok")


def markdown(frame: pd.DataFrame) -> str:
    """A GitHub table of the README's columns (3 significant figures)."""
    def cell(v):
        if isinstance(v, str):
            return v.strip()
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    lines = ["| " + " | ".join(MARKDOWN) + " |", "|" + "---|" * len(MARKDOWN)]
    for _, row in frame.iterrows():
        lines.append("| " + " | ".join(cell(row[c]) for c in MARKDOWN) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=16128)
    ap.add_argument("--markdown", action="store_true", help="print the README table (GitHub markdown)")
    ap.add_argument("--csv", help="also write the table here")
    args = ap.parse_args()
    frame = table(args.gpus)
    if args.markdown:
        print(markdown(frame))
    else:
        with pd.option_context("display.width", 250, "display.max_columns", 40, "display.float_format", "{:.3g}".format):
            print(frame.to_string(index=False))
    if args.csv:
        frame.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
