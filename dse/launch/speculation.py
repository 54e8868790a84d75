"""A serving design's speculative decoding and latency tuning as the launch writers need them.

- ``spec_decode`` (none / mtp / eagle3 / draft) and ``spec_tokens`` k, the draft length the model scored
  (blank: objectives/serving/speculative.py's DEFAULT_SPEC_TOKENS, 3): every engine is asked for a chain of
  k draft tokens (one candidate a position: the model prices a chain, not a tree);
- the EAGLE-3 head to load: ``draft_checkpoint`` of objectives/catalog/speculative.yaml for the design's
  model (the head its acceptance was measured with); a ``draft`` design's draft model is named nowhere in
  the catalog, so its launch files ask for it (``$DRAFT_MODEL``) or say what to add;
- ``latency_tuned`` 1: the min-latency configuration of objectives/serving/latency.py (CUDA graphs captured
  up to batch LATENCY_GRAPH_MAX_BATCH, 8; the overlap scheduler; PDL), on the decode (or aggregated)
  instance only: a prefill pool runs no decode steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from dse.launch.design import flag, label, whole
from objectives.serving.latency import LATENCY_GRAPH_MAX_BATCH

__all__ = ["Speculation", "speculation", "draft_checkpoint", "GRAPH_MAX_BATCH"]


#: the largest decode batch a latency-tuned deployment captures CUDA graphs for (objectives/serving/latency.py)
GRAPH_MAX_BATCH = int(LATENCY_GRAPH_MAX_BATCH)


@dataclass(frozen=True)
class Speculation:
    method: str  # none, mtp, eagle3, draft
    tokens: int  # draft length k (0 without speculation)
    draft: str | None  # the EAGLE-3 head's checkpoint (speculative.yaml), None where the catalog names none
    latency_tuned: bool

    @property
    def on(self) -> bool:
        return self.method != "none" and self.tokens > 0


def draft_checkpoint(model: str, method: str) -> str | None:
    """The draft checkpoint objectives/catalog/speculative.yaml names for ``model`` (a catalog id or an alias
    of one) and ``method``, None where it names none."""
    from objectives.catalog.model_names import canonical
    from objectives.serving.speculative import _catalog

    entry = _catalog()["acceptance"].get(canonical(model) or model, {}).get(method, {})
    named = entry.get("draft_checkpoint")
    return named["value"] if named else None


def speculation(row) -> Speculation:
    """The design's speculation and latency tuning (module doc)."""
    from objectives.serving.speculative import DEFAULT_SPEC_TOKENS

    method = label(row, "spec_decode", "none") or "none"
    # the draft length the model scored: its spec_draft_tokens, else the row's spec_tokens, else the default
    k = (whole(row, "spec_draft_tokens") or whole(row, "spec_tokens", int(DEFAULT_SPEC_TOKENS))) if method != "none" else 0
    model = str(row.get("model", ""))
    return Speculation(method=method, tokens=k or 0, draft=draft_checkpoint(model, method) if method == "eagle3" else None,
                       latency_tuned=flag(row, "latency_tuned"))
