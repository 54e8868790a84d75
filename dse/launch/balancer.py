"""A serving design's expert load balancer as the launch writers need it (objectives/serving/balance.py).

- ``eplb`` 1: the engine places the experts from the loads it measures, online (no statistics run before
  the launch); ``redundant_experts`` R copies of the hottest experts, E + R expert slots an MoE layer, ep
  dividing E + R. Blank or absent columns (runs older than the balancer) are 0: no balancer;
- E, the model's routed experts: the row's ``moe_experts``, else the model catalog's;
- a balancer needs expert parallelism (every engine balances over its EP ranks) and E + R slots that the
  EP ranks divide; where an instance has neither, the writers say so in the README instead of writing it.

Each instance of a disaggregated design runs the same balancer and copies (docs/serving.md), each over its
own ep.
"""

from __future__ import annotations

from dataclasses import dataclass

from dse.launch.design import flag, whole

__all__ = ["Balancer", "balancer"]


@dataclass(frozen=True)
class Balancer:
    on: bool  # eplb 1
    redundant: int  # R, copies of the hottest experts (0 without a balancer)
    experts: int | None  # E, the model's routed experts (None where neither the row nor the catalog names them)

    @property
    def slots(self) -> int | None:
        """E + R expert slots an MoE layer, None where E is unknown."""
        return self.experts + self.redundant if self.experts else None

    def blocked(self, ep: int, engine: str) -> str | None:
        """Why ``engine`` cannot run the balancer over ``ep`` expert-parallel ranks, None where it can."""
        if ep <= 1:
            return f"{engine} balances experts over its expert-parallel ranks and this instance has none (ep {ep})"
        if self.slots and self.slots % ep:
            return (f"{self.experts} experts + {self.redundant} copies = {self.slots} slots do not divide over "
                    f"{engine}'s {ep} expert-parallel ranks")
        return None

    def refused(self, why: str, option: str, role: str) -> str:
        """The README line of an instance that cannot run the balancer: what the design runs, why the engine
        cannot, and the option not written (each engine's writer gives its own ``why`` and option)."""
        return f"the design runs {self.words()}, but {why}: no {option} is written for the {role} instance"

    def words(self) -> str:
        """'an expert load balancer with 32 redundant experts (288 slots)'."""
        slots = f" ({self.slots} slots)" if self.slots else ""
        copies = f"with {self.redundant} redundant experts" if self.redundant else "placing only (no redundant experts)"
        return f"an expert load balancer {copies}{slots}"


def _catalog_experts(model: str) -> int | None:
    from objectives.catalog import models
    from objectives.catalog.model_names import canonical

    entry = models().get(canonical(model) or model, {})
    n = entry.get("moe_experts")
    return int(n) if n else None


def balancer(row) -> Balancer:
    """The design's expert load balancer (module doc)."""
    on = flag(row, "eplb")
    experts = whole(row, "moe_experts") or None
    if on and not experts:
        experts = _catalog_experts(str(row.get("model", "")))
    return Balancer(on=on, redundant=max(whole(row, "redundant_experts", 0) or 0, 0) if on else 0, experts=experts)
