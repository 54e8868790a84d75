#!/usr/bin/env python3
"""Build objectives/catalog/instances.yaml from the shared cloud-instance table.

Reads  <data>/cloud-instances.csv  (default data dir: /work/shared/data; a verbatim copy is kept as
tests/data/cloud-instances.csv, which tests/test_instances.py checks the catalog against) and writes one
catalog entry per rentable instance: its GPU (a gpus.yaml id) and count, NVLink domain, scale-out line
rate per GPU, fabric kind, topology, largest cluster advertised (one instance where the table publishes
no cluster fabric: no fabric, line rate or topology; :func:`one_instance`) and every published price with
its source, its kind and the date it was read (:func:`price_terms`). What the table leaves blank stays
blank (null): no price, rate or fabric is filled in.

    python tools/build_instances.py [DATA_DIR] [--out objectives/catalog/instances.yaml]

The choices made here, per instance (its id, its fabric kind, the fabric whose switches stand in for
the cloud's, what its spot column is), are the ``CHOICES`` table below. The file's head (its comment, the
fabric kinds' efficiency and latency, each provider's storage prices: everything before ``instances:``)
is maintained by hand, each number sourced, and kept as it is. The shared table's source keys S01-S38
are written C01-C38 (SOURCES.md), apart from the hardware catalog's S-keys. Standard library only, deterministic output.
"""
from __future__ import annotations

import argparse
import csv
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path("/work/shared/data")
DEFAULT_OUT = REPO / "objectives" / "catalog" / "instances.yaml"

#: the note on an instance whose provider publishes no cluster fabric (:func:`one_instance`)
ONE_INSTANCE_NOTE = ("No scale-out fabric, line rate or cluster in the source: rents at most one instance, its GPUs "
                     "on one NVLink domain")
#: (provider, instance) -> (id, fabric kind or None, stand-in network or None, spot kind or None,
#: most GPUs of the spot kind (capacity blocks) or None, a note on the choice)
CHOICES = {
    ("AWS", "p4d.24xlarge"): ("aws-p4d.24xlarge", "efa", "roce-400", "capacity_block", 2048, ""),
    ("AWS", "p5.48xlarge"): ("aws-p5.48xlarge", "efa", "roce-400", "capacity_block", 2048, ""),
    ("AWS", "p5e.48xlarge"): ("aws-p5e.48xlarge", "efa", "roce-400", "capacity_block", 2048, ""),
    ("AWS", "p5en.48xlarge"): ("aws-p5en.48xlarge", "efa", "roce-400", None, None, ""),
    ("AWS", "p6-b200.48xlarge"): ("aws-p6-b200.48xlarge", "efa", "roce-400", None, None, ""),
    ("AWS", "p6-b300.48xlarge"): ("aws-p6-b300.48xlarge", None, None, None, None,
                                  "the source names no fabric for p6-b300: the GPU's natural InfiniBand stands in"),
    ("AWS", "p6e-gb200.36xlarge"): ("aws-p6e-gb200.36xlarge", "efa", "roce-400", None, None,
                                    "sold inside UltraServers; its NVLink domain as in the x72 UltraServer"),
    ("AWS", "u-p6e-gb200x72 (UltraServer)"): ("aws-u-p6e-gb200x72", "efa", "roce-400", None, None, ""),
    ("AWS", "u-p6e-gb200x36 (UltraServer)"): ("aws-u-p6e-gb200x36", "efa", "roce-400", None, None, ""),
    ("GCP", "a3-highgpu-8g"): ("gcp-a3-highgpu-8g", "gpudirect-tcpx", "roce-400", "spot", None,
                               "per-GPU rate: at most the machine total over its GPUs, 1000 / 8 = 125 Gbit/s "
                               "(C09; the total includes the host NIC, so this is an upper bound)"),
    ("GCP", "a3-megagpu-8g"): ("gcp-a3-megagpu-8g", "gpudirect-tcpxo", "roce-400", "spot", None, ""),
    ("GCP", "a3-ultragpu-8g"): ("gcp-a3-ultragpu-8g", "roce", "roce-400", "spot", None, ""),
    ("GCP", "a4-highgpu-8g"): ("gcp-a4-highgpu-8g", "roce", "roce-400", None, None, ""),
    ("GCP", "a4x-highgpu-4g"): ("gcp-a4x-highgpu-4g", "roce", "roce-400", None, None, ""),
    ("GCP", "a4x-maxgpu-4g-metal"): ("gcp-a4x-maxgpu-4g-metal", "roce", "roce-400", None, None, ""),
    ("Azure", "Standard_ND96asr_v4 (ND A100 v4)"): ("azure-nd-a100-v4", "infiniband", "ib-ndr-200", "spot", None, ""),
    ("Azure", "Standard_ND96amsr_A100_v4 (NDm A100 v4)"): ("azure-ndm-a100-v4", "infiniband", "ib-ndr-200", "spot",
                                                            None, ""),
    ("Azure", "Standard_ND96isr_H100_v5 (ND H100 v5)"): ("azure-nd-h100-v5", "infiniband", "ib-ndr-400", None, None, ""),
    ("Azure", "Standard_ND96isr_H200_v5 (ND H200 v5)"): ("azure-nd-h200-v5", "infiniband", "ib-ndr-400", None, None, ""),
    ("Azure", "Standard_ND128isr_NDR_GB200_v6 (ND GB200 v6)"): ("azure-nd-gb200-v6", "infiniband", "ib-ndr-400", None,
                                                                None, ""),
    ("Azure", "Standard_ND128isr_GB300_v6 (ND GB300 v6)"): ("azure-nd-gb300-v6", "infiniband", "ib-xdr-800", None,
                                                            None, ""),
    ("OCI", "BM.GPU.A100-v2.8"): ("oci-bm.gpu.a100-v2.8", "roce", "roce-400", None, None, ""),
    ("OCI", "BM.GPU.H100.8"): ("oci-bm.gpu.h100.8", "roce", "roce-400", None, None, ""),
    ("OCI", "BM.GPU.H200.8"): ("oci-bm.gpu.h200.8", "roce", "roce-400", None, None, ""),
    ("OCI", "BM.GPU.B200.8"): ("oci-bm.gpu.b200.8", "roce", "roce-400", None, None, ""),
    ("OCI", "BM.GPU.B300.8"): ("oci-bm.gpu.b300.8", "roce", "roce-400", None, None, ""),
    ("OCI", "BM.GPU.GB200.4"): ("oci-bm.gpu.gb200.4", "roce", "roce-400", None, None,
                                "between memory fabrics RoCE or InfiniBand (C22): RoCE, OCI's RDMA cluster network (C20/C21)"),
    ("OCI", "BM.GPU.GB300.4"): ("oci-bm.gpu.gb300.4", "roce", "roce-400", None, None,
                                "between memory fabrics RoCE or InfiniBand (C22): RoCE, OCI's RDMA cluster network (C20/C21)"),
    ("CoreWeave", "HGX H100 (8x)"): ("coreweave-hgx-h100", "infiniband", "ib-ndr-400", "spot", None, ""),
    ("CoreWeave", "HGX H200 (8x)"): ("coreweave-hgx-h200", "infiniband", "ib-ndr-400", "spot", None, ""),
    ("CoreWeave", "HGX B200 (8x)"): ("coreweave-hgx-b200", "infiniband", "ib-ndr-400", "spot", None, ""),
    ("CoreWeave", "GB200 NVL72 (4-GPU node)"): ("coreweave-gb200-nvl72", "infiniband", "ib-ndr-400", None, None, ""),
    ("Lambda", "8x NVIDIA H100 SXM"): ("lambda-8x-h100", None, None, None, None, ONE_INSTANCE_NOTE),
    ("Lambda", "8x NVIDIA B200 SXM6"): ("lambda-8x-b200", None, None, None, None, ONE_INSTANCE_NOTE),
    ("Lambda", "8x NVIDIA A100 SXM 80 GB"): ("lambda-8x-a100-80gb", None, None, None, None, ONE_INSTANCE_NOTE),
}
#: rows of the table that are no instance one can price: why
LEFT_OUT = {("NVIDIA", "DGX Cloud (DGX Cloud Create)"): "no GPU type and no published price (C25)"}
#: the largest cluster a provider advertises for an instance, where the table gives a number: id -> (GPUs, source)
MAX_CLUSTER = {
    "oci-bm.gpu.b200.8": (131072, "C21: zettascale cluster up to 131,072 Blackwell GPUs"),
    "oci-bm.gpu.gb200.4": (131072, "C21: 131,072-GPU Clos"),
    "azure-nd-gb200-v6": (100000, "C15: InfiniBand to up to 100,000 GPUs"),
    "azure-nd-gb300-v6": (100000, "C16: InfiniBand to up to 100,000 GPUs (first cluster 4,608 GPUs, C34)"),
}
#: a published price that is a third-party market figure, not the provider's: (id, pricing) -> why
MARKET_PRICES = {("oci-bm.gpu.h200.8", "reserved_3y"): "C08 quotes Economize, a third-party price tracker"}
#: pricing -> the table's price column; the words that name it in price_region_and_date's "label: ..." parts
PRICE_COLUMNS = {"on_demand": "on_demand_usd_per_gpu_hr", "reserved_1y": "reserved_1y_usd_per_gpu_hr",
                 "reserved_3y": "reserved_3y_usd_per_gpu_hr", "spot": "spot_or_capacity_block_usd_per_gpu_hr"}
PRICE_LABELS = {"on_demand": ("on-demand", "list"), "reserved_1y": ("1y",), "reserved_3y": ("3y",),
                "spot": ("capacity block", "spot")}
PROVIDER_IDS = {"AWS": "aws", "GCP": "gcp", "Azure": "azure", "OCI": "oci", "CoreWeave": "coreweave", "Lambda": "lambda"}

def c_keys(text: str) -> str:
    """The table's source keys S01-S38 as C01-C38 (SOURCES.md), apart from the hardware catalog's S-keys."""
    return re.sub(r"\bS(\d\d)\b", r"C\1", text)


def one_instance(row: dict) -> bool:
    """The table publishes no cluster fabric for the instance: no scale-out fabric, no line rate and no topology
    or cluster (Lambda's rows). It rents at most one instance's GPUs unless MAX_CLUSTER gives a documented cluster."""
    return not any(row[k].strip() for k in ("fabric", "scaleout_gbit_per_s_per_instance", "topology_notes"))


def price_terms(row: dict, iid: str, spot_kind: str | None) -> dict[str, tuple[str, str | None]]:
    """Pricing -> (kind, the date its source was read or None: not stated) for each published price.

    The kind: ``list`` (the provider's on-demand or commitment price), ``spot`` or ``capacity_block`` (its
    published spot or Capacity Block price), ``market_estimate`` (MARKET_PRICES). The date: the ISO date of
    the part of ``price_region_and_date`` that names the pricing ("on-demand and 1y RI: us-east-1,
    2026-01-21"; a part naming none covers the rest); "rates valid to 2025-01-01" is no read date, a year
    alone ("catalog snapshot (2025)") no date either."""
    parts = [p.strip() for p in row["price_region_and_date"].split(";")]
    by_pricing: dict[str, str] = {}
    unlabeled = []
    for part in parts:
        label, colon, _ = part.partition(":")
        named = [p for p, words in PRICE_LABELS.items() if colon and any(w in label.lower() for w in words)]
        if named:
            by_pricing.update(dict.fromkeys(named, part))
        elif not part.lower().startswith("no "):  # "no on-demand price in S01": no price, no date
            unlabeled.append(part)
    out = {}
    for pricing, col in PRICE_COLUMNS.items():
        if _num(row[col]) is None:
            continue
        part = by_pricing.get(pricing, unlabeled[0] if len(unlabeled) == 1 else None)
        if part is None:
            raise SystemExit(f"{iid}: no part of price_region_and_date names its {pricing} price: {parts}")
        dates = re.findall(r"(?<!valid to )\b(\d{4}-\d{2}-\d{2})\b", part)
        kind = "list" if pricing != "spot" else spot_kind
        out[pricing] = ("market_estimate" if (iid, pricing) in MARKET_PRICES else kind, dates[0] if dates else None)
    return out


def _num(cell: str):
    return None if cell.strip() == "" else float(cell)


def _q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _field(value, source: str, confidence: str) -> str:
    v = "null" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))
    return f"{{value: {v}, source: {_q(source)}, confidence: {confidence}}}"


def entry(row: dict) -> list[str]:
    key = (row["provider"], row["instance"])
    iid, fabric, network, spot_kind, spot_max, note = CHOICES[key]
    conf, src = row["confidence"], c_keys(row["source"])
    where = c_keys(row["price_region_and_date"])
    rate = _num(row["scaleout_gbit_per_s_per_gpu"])
    rate_src = f"{src}: {c_keys(row['scaleout_gbit_per_s_per_instance'] or '?')} Gbit/s per instance / {row['gpus_per_instance']} GPUs"
    if iid == "gcp-a3-highgpu-8g":
        rate, rate_src = 1000.0 / 8, c_keys(note)
    elif rate is None and one_instance(row):
        rate_src = (f"not found ({src}): the GPU system's NIC (gpus.yaml) stands in, used only by a what-if "
                    "beyond one instance (max_cluster_gpus)")
    elif rate is None:
        rate_src = f"not found ({src}): the GPU system's NIC (gpus.yaml) stands in"
    lines = [f"  {iid}:",
             f"    provider: {PROVIDER_IDS[row['provider']]}",
             f"    name: {_q(row['instance'])}",
             f"    gpu: {row['gpu']}",
             f"    gpus_per_instance: {int(row['gpus_per_instance'])}",
             f"    gpu_memory_gb: {row['gpu_memory_gb'] or 'null'}",
             f"    scaleup_size: {_field(int(row['scaleup_domain_gpus']), src, conf)}",
             f"    scaleout_gbit_s_per_gpu: {_field(rate, rate_src, conf)}",
             f"    fabric: {fabric or 'null'}",
             f"    fabric_name: {_q(c_keys(row['fabric']))}",
             f"    network: {network or 'null'}",
             f"    topology: {_q(c_keys(row['topology_notes']))}"]
    if iid in MAX_CLUSTER:
        gpus, why = MAX_CLUSTER[iid]
        lines.append(f"    max_cluster_gpus: {_field(gpus, why, conf)}")
    elif one_instance(row):  # no cluster fabric published: one instance, not an InfiniBand cluster of any size
        gpus = int(row["gpus_per_instance"])
        why = f"no published cluster fabric ({src} gives no scale-out fabric, line rate or cluster): one instance"
        lines.append(f"    max_cluster_gpus: {{value: {gpus}, one_instance: true, source: {_q(why)}, confidence: {conf}}}")
    lines.append(f"    prices_source: {_q(where)}")
    lines.append("    prices:  # USD per GPU-hour; null: not published")
    for kind, col in PRICE_COLUMNS.items():
        value = _num(row[col])
        lines.append(f"      {kind}: {'null' if value is None else f'{value:g}'}")
    terms = price_terms(row, iid, spot_kind)
    lines.append(f"    price_kind: {{{', '.join(f'{p}: {k}' for p, (k, _) in terms.items())}}}")
    lines.append(f"    prices_read: {{{', '.join(f'{p}: ' + (_q(d) if d else 'null') for p, (_, d) in terms.items())}}}")
    for pricing, why in MARKET_PRICES.items():
        if pricing[0] == iid:
            lines.append(f"    market_estimate_source: {_q(why)}")
    if _num(row["spot_or_capacity_block_usd_per_gpu_hr"]) is not None:
        lines.append(f"    spot_kind: {spot_kind}")
        if spot_max:
            why = "C03: at most 64 instances per Capacity Block and 256 across blocks (256 x 8 GPUs)"
            lines.append(f"    spot_max_gpus: {_field(spot_max, why, conf)}")
    lines += [f"    cpu_and_host_memory: {_q(row['cpu_and_host_memory'])}",
              f"    source: {_q(src)}",
              f"    confidence: {conf}",
              f"    notes: {_q(c_keys(row['notes']) + ((' ' + note + '.') if note and iid != 'gcp-a3-highgpu-8g' else ''))}"]
    return lines


def build(data: Path, out_path: Path) -> str:
    rows = list(csv.DictReader((data / "cloud-instances.csv").open(newline="")))
    unknown = [(r["provider"], r["instance"]) for r in rows
               if (r["provider"], r["instance"]) not in CHOICES and (r["provider"], r["instance"]) not in LEFT_OUT]
    if unknown:
        raise SystemExit(f"rows without a choice in CHOICES: {unknown}")
    head = out_path.read_text().split("\ninstances:\n")[0] if out_path.exists() else ""
    out = [head, "instances:"]
    for r in rows:
        if (r["provider"], r["instance"]) in CHOICES:
            out += entry(r)
    return "\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args()
    args.out.write_text(build(args.data, args.out))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
