"""`dse catalog [gpus|models|networks|storage|instances|metrics]`: what a space or a design table may name.

Every id of a catalog (objectives/catalog/*.yaml, each number sourced in SOURCES.md) with its key numbers
and their units, or every metric (an output column of the model) that an objective or a constraint may
name, with its unit and meaning. Without an argument: each catalog's ids. ``instances`` lists the cloud
instances where the installed ``objectives`` has that catalog (and says so where it has not).
"""

from __future__ import annotations

import argparse

from dse.report.names import number, unit_of

__all__ = ["add_parser", "run", "CATALOGS"]

#: catalog -> [(field, header)]: the key numbers it lists, each header with its unit
KEY_FIELDS: dict[str, list[tuple[str, str]]] = {
    "gpus": [("gpu_bf16_tflop_s", "bf16 TFLOP/s"), ("gpu_fp8_tflop_s", "fp8 TFLOP/s"),
             ("gpu_fp4_tflop_s", "fp4 TFLOP/s"), ("gpu_hbm_gb", "HBM GB"), ("gpu_hbm_tbyte_s", "HBM TB/s"),
             ("scaleup_size", "NVLink domain GPUs"), ("scaleup_gbyte_s", "NVLink GB/s"), ("nic_gbyte_s", "NIC GB/s"),
             ("gpu_tdp_w", "TDP W"), ("server_usd_per_gpu", "server $/GPU"),
             ("cloud_usd_per_gpu_hr", "cloud $/GPU-h (market est.)"),
             ("confidence", "confidence")],  # the weakest spec figure's: meas > spec > rep > rec > announced > est
    "models": [("n_params", "params B"), ("n_params_active", "active B"), ("n_layers", "layers"),
               ("d_model", "d_model"), ("n_heads", "heads"), ("n_kv_heads", "kv heads"), ("d_ff", "d_ff"),
               ("moe_experts", "experts"), ("moe_topk", "top-k"), ("vocab_size", "vocab"), ("seq_len", "seq tokens")],
    "networks": [("net_port_gbyte_s", "port GB/s"), ("net_switch_radix", "switch radix"),
                 ("net_eff_rel", "efficiency vs NDR"), ("net_hop_latency_s", "hop latency µs"),
                 ("net_switch_usd", "switch $"), ("net_switch_w", "switch W"), ("net_optic_usd", "optic $"),
                 ("net_nic_usd", "NIC $")],
    "storage": [("storage_unit_tb", "unit TB"), ("storage_unit_read_gbyte_s", "read GB/s"),
                ("storage_unit_write_gbyte_s", "write GB/s"), ("storage_unit_usd", "unit $"),
                ("storage_unit_w", "unit W"), ("storage_cloud_usd_per_tb_month", "cloud $/TB-month")],
    "instances": [("gpu", "gpu"), ("instance_gpus", "GPUs"), ("scaleup_size", "NVLink domain"),
                  ("nic_gbit_s", "scale-out Gbit/s per GPU"), ("fabric", "fabric"),
                  ("usd.on_demand", "on-demand $/GPU-h"), ("usd.reserved_1y", "1y $/GPU-h"),
                  ("usd.reserved_3y", "3y $/GPU-h"), ("usd.spot", "spot $/GPU-h"), ("largest_gpus", "largest GPUs"),
                  ("largest_spot_gpus", "largest spot GPUs"), ("spot_preempt_h", "spot node-h per preemption")],
}
CATALOGS = ("gpus", "models", "networks", "storage", "instances", "metrics")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("catalog", help="what a space may name: the GPUs, models, networks, storage, instances and metrics",
                       description=__doc__)
    p.add_argument("what", nargs="?", choices=CATALOGS, help="which catalog (default: every catalog's ids)")
    p.set_defaults(run=run)


def _entries(what: str) -> dict[str, dict] | None:
    """id -> {field: value} of a catalog, or None where the installed objectives has no such catalog."""
    from objectives import catalog

    if what == "models":
        return _models()
    getter = getattr(catalog, {"gpus": "gpus", "networks": "networks", "storage": "storage",
                               "instances": "instances"}[what], None)
    if not callable(getter):
        return None
    entries = {k: _flat(v) for k, v in sorted(getter().items())}
    if what == "gpus":  # how sure each system's figures are (objectives/catalog/estimates.py)
        from objectives.catalog.estimates import gpu_confidence
        sure = gpu_confidence()
        for k, e in entries.items():
            e["confidence"] = sure.get(k, "–")
    if what == "instances":  # prices and the largest rental by pricing kind; the line rate as a network engineer reads it
        from objectives.catalog.instances import PRICINGS as pricings
        for k, e in entries.items():
            raw = getter()[k]
            e.update({f"usd.{p}": raw["prices"][j] for j, p in enumerate(pricings)})
            e["nic_gbit_s"] = raw["nic_gbyte_s"] * 8.0
            e["largest_gpus"] = float(raw["max_gpus"][pricings.index("on_demand")])
            e["largest_spot_gpus"] = float(raw["max_gpus"][pricings.index("spot")])
            preemptible = raw["preemptible"][pricings.index("spot")] > 0  # blank: not preemptible (a Capacity Block)
            e["spot_preempt_h"] = raw["spot_preempt_mtbi_h_per_node"] if preemptible else float("nan")
    return entries


def _flat(entry) -> dict:
    """A catalog entry's fields; a nested mapping (prices by kind) as ``field.key``."""
    out = {}
    for k, v in (entry.items() if isinstance(entry, dict) else ()):
        if isinstance(v, dict) and "value" not in v:
            out.update({f"{k}.{kk}": vv for kk, vv in v.items() if not isinstance(vv, (dict, list))})
        elif isinstance(v, dict):
            out[k] = v["value"]
        elif not isinstance(v, list):
            out[k] = v
    return out


def _models() -> dict[str, dict]:
    """Every model's architecture numbers and its parameters counted by objectives.training.transformer."""
    import numpy as np

    import objectives
    from objectives import catalog

    ids = catalog.model_ids()
    counting = tuple(m for m in objectives.MODELS if "n_params" in m.provides)
    params = {}
    if counting:
        out = objectives.evaluate({"model": np.array(ids, dtype=object), "gpu": catalog.gpu_ids()[0], "n_gpus": 8,
                                   "global_batch": 8, "tp": 1, "pp": 1, "micro_batch": 1}, models=counting)
        params = {i: {"n_params": out["n_params"][k] / 1e9, "n_params_active": out["n_params_active"][k] / 1e9}
                  for k, i in enumerate(ids)}
    models = catalog.models()
    return {i: {**models[i], **params.get(i, {})} for i in ids}


def _cell(field: str, v) -> str:
    if isinstance(v, str):
        return v
    if v is None:  # not published (an instance's fabric)
        return "–"
    try:
        v = float(v)
    except (TypeError, ValueError):
        return str(v)
    if v != v or v == float("inf"):  # NaN: the catalog has no such number (a GPU without fp8); inf: no limit stated
        return "–"
    if field == "net_hop_latency_s":
        v *= 1e6
    if field == "ffn_kind":
        return str(int(v))
    return number(v, 4 if field.startswith("n_params") else 3)


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) if i < left else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join(t.rstrip() for t in [line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])


def catalog_text(what: str) -> str:
    """The listing of one catalog (or of the metrics)."""
    import objectives

    if what == "metrics":
        rows = []
        for name, text in objectives.METRICS.items():
            unit, _, meaning = text.partition(";")
            rows.append([name, unit.strip(), meaning.strip()])
        return (f"{len(rows)} metrics an objective or a constraint may name (a constraint may also name any "
                f"design-table column):\n" + _table(["metric", "unit", "meaning"], rows, left=3))
    entries = _entries(what)
    version = getattr(objectives, "__version__", "?")
    if entries is None:
        return f"objectives {version} has no {what} catalog (objectives/catalog/{what}.yaml)"
    fields = KEY_FIELDS.get(what)
    if fields is None:  # a catalog this command has no key list for: every scalar field, the unit from its name
        names = list(dict.fromkeys(k for e in entries.values() for k in e if k not in ("source", "sources")))
        fields = [(k, f"{k} ({unit_of(k)})" if unit_of(k) else k) for k in names]
    rows = [[i] + [_cell(f, e.get(f, float("nan"))) for f, _ in fields] for i, e in entries.items()]
    head = {"gpus": "GPU systems", "models": "models", "networks": "scale-out fabrics", "storage": "storage systems",
            "instances": "cloud instances"}[what]
    text = f"{len(rows)} {head} (objectives/catalog/{what}.yaml):\n" + _table([what[:-1] if what.endswith("s") else what]
                                                                             + [h for _, h in fields], rows)
    return text + "\n\n" + _price_terms() if what == "instances" else text


def _price_terms() -> str:
    """Each published instance price with its kind and the date its source was read (instances.yaml
    ``price_kind``, ``prices_read``), and what gpus.yaml's cloud prices are."""
    from objectives.catalog.instances import GPU_CLOUD_PRICE, PRICE_KINDS, PRICINGS, instances

    rows = [[iid, p, e["price_kind"][p] or "not stated", e["prices_read"][p] or "date not stated",
             _cell("usd", e["prices"][j])]
            for iid, e in sorted(instances().items()) for j, p in enumerate(PRICINGS) if e["prices"][j] == e["prices"][j]]
    gpu = GPU_CLOUD_PRICE
    return (f"{len(rows)} published instance prices, each with its kind ({', '.join(PRICE_KINDS)}) and the "
            f"date its source was read:\n"
            + _table(["instance", "pricing", "kind", "read", "$/GPU-h"], rows, left=4)
            + f"\ngpus.yaml's cloud $/GPU-h (a cloud design naming no instance): {gpu['kind']}, "
              f"{gpu['read'] or 'date not stated'}")


def run(args: argparse.Namespace) -> int:
    if args.what:
        print(catalog_text(args.what))
        return 0
    import objectives

    for what in CATALOGS[:-1]:
        entries = _entries(what)
        if entries is not None:
            print(f"{what} ({len(entries)}): {', '.join(entries)}")
    print(f"metrics ({len(objectives.METRICS)}): dse catalog metrics")
    return 0
