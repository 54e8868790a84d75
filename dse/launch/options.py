"""The option names each launch target documents (``options.yaml``, with the version and source of each
list), and the check every writer passes through: an option not in the list is never written."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

__all__ = ["OPTIONS_PATH", "TARGETS", "targets", "documented", "check", "check_values", "flags_in", "keys_in", "SYNTAX"]

OPTIONS_PATH = Path(__file__).with_name("options.yaml")
#: what a name of each kind looks like: a flag as typed (``--tp_size``, ``--max-num-seqs``), a dotted key
#: of a config object (``model.tensor_model_parallel_size``, ``kv_cache_config.dtype``)
SYNTAX = {
    "cli-flags": re.compile(r"--[a-z0-9]+(?:[-_][a-z0-9]+)*"),
    "config-keys": re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*"),
}
#: the targets a writer may name
TARGETS = ("megatron-bridge", "megatron-bridge-launcher", "trtllm-serve", "trtllm-llm-api", "vllm-serve",
           "sglang-launch-server")


@functools.cache
def targets() -> dict[str, dict]:
    """Target -> its entry of options.yaml (kind, version, sources, options, left_out)."""
    return yaml.safe_load(OPTIONS_PATH.read_text())


def documented(target: str) -> frozenset[str]:
    """The option names ``target`` may write."""
    return frozenset(targets()[target]["options"])


def check(target: str, names: Iterable[str]) -> list[str]:
    """``names`` (as a list), each documented for ``target``; a name that is not is a bug in a writer
    (an option nobody checked against the engine's documentation), raised, never written."""
    names = list(names)
    allowed = documented(target)
    extra = [n for n in names if n not in allowed]
    if extra:
        raise ValueError(f"dse launch would write {extra} for {target}, which dse/launch/options.yaml does not "
                         "document: check the engine's documentation and add it there, with its source")
    return names


def check_values(target: str, values: Mapping[str, object]) -> None:
    """Each value of ``values`` (option -> value; a list value item by item) one that options.yaml lists for
    its option, where it lists any; another is a writer's bug, raised."""
    listed = targets()[target].get("values") or {}
    for name, value in values.items():
        if name not in listed:
            continue
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if v not in listed[name]:
                raise ValueError(f"dse launch would write {name} {v!r} for {target}, not among the values "
                                 f"dse/launch/options.yaml documents ({listed[name]})")


def flags_in(command: str) -> list[str]:
    """The flags (``--name``) of a shell command, in order, each once; a flag's ``=value`` left off."""
    found = re.findall(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9_-]*)", command)
    return list(dict.fromkeys(found))


def keys_in(tree: Mapping, prefix: str = "") -> list[str]:
    """The dotted paths of the leaves of a nested mapping (a YAML of options): ``kv_cache_config.dtype``."""
    out = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out += keys_in(value, path + ".")
        else:
            out.append(path)
    return out
