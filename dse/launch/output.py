"""What a launch writer returns: the files (name -> text), the option names it wrote per target (each
checked against dse/launch/options.yaml as it is added) and notes for the README; and the shell text the
writers share."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from dse.launch.options import check, check_values

__all__ = ["Output", "Raw", "command_text", "script", "value_text"]


class Raw(str):
    """Shell text written as it is (a "${VAR:?...}" expansion), not quoted as a value."""


@dataclass
class Output:
    files: dict[str, str] = field(default_factory=dict)
    emitted: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def emit(self, target: str, options) -> None:
        """Record ``options`` (names, or a mapping name -> value) as written for ``target``; an undocumented
        name, or a value the list does not give for its name, raises (options.check, check_values)."""
        if isinstance(options, dict):
            check_values(target, options)
        self.emitted.setdefault(target, []).extend(check(target, list(options)))

    def kv_cache_dtype(self, kv_precision: str, names: dict[str, str], engine: str) -> str | None:
        """The engine's ``--kv-cache-dtype`` value for the design's KV precision (``names``: precision -> the
        engine's documented value); None, with a note, where the engine documents none for it."""
        kv = names.get(kv_precision)
        if kv is None:
            self.notes.append(f"the design's KV cache is {kv_precision}; no {engine} --kv-cache-dtype for it is "
                              "documented in dse/launch/options.yaml, so none is written (the engine's default, auto)")
        return kv

    def merge(self, other: Output) -> Output:
        self.files.update(other.files)
        for target, names in other.emitted.items():
            self.emitted.setdefault(target, []).extend(names)
        self.notes += [n for n in other.notes if n not in self.notes]
        return self


def value_text(v) -> str:
    """A value as a command line or an override takes it: true/false, null, [a,b], numbers as written."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(value_text(x) for x in v) + "]"
    if isinstance(v, float) and v == int(v):
        return str(int(v))
    return str(v)


def command_text(head: list[str], args: list[tuple[str, object]]) -> str:
    """A command, one flag a line: ``head`` as given (already quoted where it must be: "$MODEL"), then each
    (flag, value); a value of True is a bare switch, None leaves the flag out."""
    lines = [" ".join(head)]
    for name, value in args:
        if value is None or value is False:
            continue
        text = value if isinstance(value, Raw) else shlex.quote(value_text(value))
        lines.append(name if value is True else f"{name} {text}")
    return " \\\n    ".join(lines)


def script(comment: list[str], body: str) -> str:
    """A bash script: the comment lines, ``set -euo pipefail``, then ``body``."""
    head = ["#!/usr/bin/env bash"] + [f"# {c}".rstrip() for c in comment]
    return "\n".join(head + ["set -euo pipefail", "", body, ""])
