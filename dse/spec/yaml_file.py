"""Reading a YAML file a user gives (a space), one mistake one line: the file's own problems (missing, not
a file, unreadable, not UTF-8) and YAML's (syntax with its line, a key given twice, nesting beyond
:data:`MAX_DEPTH`, a standard tag its value cannot make)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dse.errors import UserError

__all__ = ["read_yaml", "MAX_DEPTH", "MAX_BYTES"]

#: how deep a space's mappings and lists may nest (a space needs 4; a deeper one is an error, not a crash)
MAX_DEPTH = 64
#: the largest space, calibration or price file read: a 1,000,000-value list (10 MB) took PyYAML's Python loader
#: over 30 s to parse; the shipped files are under 10 kB and a 100,000-value list (1 MB) parses in about 3 s
MAX_BYTES = 1_000_000


class _SpaceLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses what a space file cannot mean: a key given twice in one mapping
    (YAML 1.2 forbids it; PyYAML would keep the last silently) and nesting deeper than :data:`MAX_DEPTH`
    (which would exhaust Python's recursion before any check)."""

    _depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep",
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)  # cached: the mapping's construction reuses it
            if not isinstance(key, (str, int, float, bool)):
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {str(key)[:40]!r} given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _excerpt(text: str, limit: int = 80) -> str:
    """A value's text cut to ``limit`` characters for a one-line message."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def read_yaml(path: str | Path, what: str = "space file") -> Any:
    """(a YAML file's document, its text), or a one-line UserError naming the file and what is wrong: missing, not a file,
    larger than MAX_BYTES, unreadable, not UTF-8, not YAML (with its line), a key given twice, nested too deep, or a tagged value its
    tag cannot make (``!!int "abc"``)."""
    p = Path(path)
    source = str(path)
    if not p.exists():
        raise UserError(f"no such {what}", where=source)
    if not p.is_file():
        raise UserError(f"is not a file (a {what} is a YAML file)", where=source)
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:  # read before parsing: the YAML parser takes seconds per megabyte
            raise UserError(f"a {what} of {size:,} bytes: at most {MAX_BYTES:,} (it names choices and settings, "
                            "not data)", where=source)
        data = p.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read the {what}: {exc.strerror or exc}", where=source) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}", where=source) from None
    try:
        return yaml.load(text, Loader=_SpaceLoader), text
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{line}not valid YAML: {_excerpt(problem)}", where=source) from None
    except (ValueError, TypeError, OverflowError, KeyError, AttributeError, IndexError) as exc:
        # a standard tag's constructor on a bad value (!!bool "maybe" is a KeyError in PyYAML's)
        raise UserError(f"not valid YAML: a tagged value cannot be read ({_excerpt(exc)})", where=source) from None
    except RecursionError:
        raise UserError(f"not valid YAML: nested too deeply (more than {MAX_DEPTH} levels)", where=source) from None


