"""What a ``model`` cell may name: a catalog id, an alias of one, or a Hugging Face config.json.

- a ``models.yaml`` id (``llama3-70b``);
- an alias (``model_aliases.yaml``: ``llama3.1-70b``, ``meta-llama/Meta-Llama-3-70B``; each with its
  reason): that entry's architecture, the cell keeping the name the user gave; a Hugging Face id
  (``owner/name``) matches ignoring case;
- a path ending ``.json``: a Hugging Face config.json of a supported family (:mod:`objectives.catalog.hf_config`),
  read once per file (relative to the working directory; a space's is relative to the space file and read
  by ``dse.spec``), its architecture columns as a catalog entry's. The row must give ``seq_len`` where the
  file records no pre-training length.

Anything else is an InputError naming the closest names. :func:`with_names` runs on a column's few
distinct labels, never per row.
"""

from __future__ import annotations

import difflib
import functools
import os
from pathlib import Path

import numpy as np
import yaml

from objectives.catalog.hf_config import ConfigError, is_config_path, load
from objectives.table import CATEGORIES, InputError, factorize, is_constant

__all__ = ["aliases", "canonical", "model_row", "config_row", "with_names", "unknown_model"]

HERE = Path(__file__).parent


@functools.cache
def aliases() -> dict[str, str]:
    """Alias -> catalog id (``model_aliases.yaml``); each target a catalog id, no alias an id itself."""
    from objectives.catalog import models

    raw = yaml.safe_load((HERE / "model_aliases.yaml").read_text())["aliases"]
    out = {}
    for name, entry in raw.items():
        target = entry["model"]
        if target not in models() or name in models() or not entry.get("reason"):
            raise ValueError(f"model_aliases.yaml: {name}: needs a catalog model that is not itself and a reason")
        out[str(name)] = target
    return out


@functools.cache
def _folded() -> dict[str, str]:
    return {name.lower(): target for name, target in aliases().items()}


def canonical(label) -> str | None:
    """The catalog id a label names (an id, or an alias; a Hugging Face id ignoring case), else None."""
    from objectives.catalog import models

    if not isinstance(label, str):
        return None
    label = label.strip()
    if label in models():
        return label
    return aliases().get(label) or _folded().get(label.lower())


def unknown_model(label) -> str:
    """The message for a model name that is none of the three."""
    from objectives.catalog import model_ids

    close = difflib.get_close_matches(str(label), model_ids() + list(aliases()), n=3)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return (f"unknown model {str(label)!r}; {hint}valid: a catalog id ({', '.join(model_ids())}), an alias "
            f"(objectives/catalog/model_aliases.yaml) or a Hugging Face config.json path")


def model_row(spec: dict) -> dict[str, float]:
    """A models.yaml-style entry as :func:`objectives.catalog.models` gives it (names encoded, defaults filled)."""
    from objectives.catalog import MODEL_FIELD_DEFAULTS, MODEL_FIELDS

    row = {}
    for f in MODEL_FIELDS:
        v = spec.get(f)
        row[f] = np.nan if v is None else v if isinstance(v, str) else float(v)
    row["ffn_kind"] = float(CATEGORIES["ffn_kind"].index(str(row["ffn_kind"]).lower()))
    kind = row["attn_window_kind"]
    row["attn_window_kind"] = float(CATEGORIES["attn_window_kind"].index(kind)) if isinstance(kind, str) else np.nan
    for key, default in MODEL_FIELD_DEFAULTS.items():
        if np.isnan(row[key]):
            row[key] = default
    if np.isnan(row["n_kv_heads"]):
        row["n_kv_heads"] = row["n_heads"]
    if np.isnan(row["d_head"]):
        row["d_head"] = row["d_model"] / row["n_heads"]
    return row


def config_row(path: str) -> dict[str, float]:
    """The catalog row of a config.json (read again only when the file changed)."""
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        stamp = -1  # load() names the problem
    return _config_row(path, stamp)


@functools.lru_cache(maxsize=64)
def _config_row(path: str, stamp: int) -> dict[str, float]:
    return model_row(load(path))


def with_names(column, catalog: dict, strict: bool) -> dict:
    """``catalog`` with an entry for each alias in ``column`` and, where ``strict`` (the rows do not spell
    out their architecture), each config.json path; strict, any other unknown label is an InputError with
    the closest names. ``catalog`` itself where every label is an id."""
    column = np.asarray(column)
    if is_constant(column) and len(column):
        column = column[:1]
    codes, labels = factorize(column)
    extra: dict = {}
    for i, label in enumerate(labels):
        if not isinstance(label, str) or label in catalog or label in extra:
            continue
        target = canonical(label)
        try:
            if target is not None:
                extra[label] = catalog[target]
            elif strict and is_config_path(label):
                extra[label] = config_row(label.strip())
            elif strict and label.strip() not in ("", "nan", "None"):
                raise InputError(unknown_model(label), column="model", row=int(np.argmax(codes == i)))
        except ConfigError as exc:
            raise InputError(str(exc), column="model", row=int(np.argmax(codes == i))) from None
    return {**catalog, **extra} if extra else catalog
