"""The layout of both packages: every module of ``dse`` belongs to a stage of ``dse.STAGES`` and every module
of ``objectives`` to one of ``objectives.STAGES``, and imports only from its own stage or an earlier one (read
from the source with ``ast``, lazy imports inside functions included, nothing imported); no module of
``objectives`` imports the package's API (its ``__init__``, which imports them all); no module is over 400
lines; Optuna's private names appear in one module, ``dse/study/internals.py``, which says why each is
needed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dse
import objectives

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dse"
#: package -> (its stages, the stage index of the package's own ``__init__``): dse's holds its version and
#: stage table (before every stage), objectives' is the models' API, importing every stage (after them all)
LAYOUTS = {"dse": (dse.STAGES, -1), "objectives": (objectives.STAGES, len(objectives.STAGES))}
MAX_LINES = 400
INTERNALS = PACKAGE / "study" / "internals.py"
#: attributes of Optuna's objects that are not its public API (``trial._trial_id``, ``study._storage``, ...)
OPTUNA_PRIVATE = {"_storage", "_study_id", "_trial_id", "_thread_local", "_population_size", "_get_generation_key",
                  "_get_parent_cache_key_prefix", "_contains", "_cached_frozen_trial", "_get_trials", "_suggest",
                  "_validate", "_studies", "_get_trial", "_set_trial", "_check_study_id", "_max_trial_id",
                  "_trial_id_to_study_id_and_number", "_update_cache", "_CONSTRAINTS_KEY", "_pop_waiting_trial_id",
                  "_all_grids", "_n_min_trials"}


def modules(package: str = "dse") -> dict[str, Path]:
    """Module name -> file, for every module of ``package``."""
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def stage_of(module: str) -> int | None:
    """The index in its package's stage table of the stage that holds ``module`` (None: no stage declares it;
    the package itself: the index LAYOUTS gives its ``__init__``)."""
    package = module.split(".")[0]
    if package not in LAYOUTS:
        return None
    stages, own = LAYOUTS[package]
    if module == package:
        return own
    for i, (_, prefixes) in enumerate(stages):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    return None


def imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, module) of every module of the same package that ``path`` imports, wherever the import statement
    is. ``from objectives import catalog`` imports the module objectives.catalog, not the package's API."""
    package = module.split(".")[0]
    known = modules(package)
    is_package = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the importer's package
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            submodules = [f"{name}.{a.name}" for a in node.names if f"{name}.{a.name}" in known]
            if len(submodules) < len(node.names):  # a name defined in the module itself
                out.append((node.lineno, name))
            out += [(node.lineno, m) for m in submodules]
    return [(line, name) for line, name in out if name == package or name.startswith(package + ".")]


@pytest.mark.parametrize("package", sorted(LAYOUTS))
def test_every_module_belongs_to_a_stage(package):
    missing = [m for m in modules(package) if stage_of(m) is None]
    assert not missing, f"declare the stage of {missing} in {package}.STAGES ({package}/__init__.py)"


@pytest.mark.parametrize("package", sorted(LAYOUTS))
def test_no_module_imports_one_downstream_of_it(package):
    """dse's stages in order: spec, space, problem, study, cluster, store, report, sweep, then the command
    line; objectives': core, training, economics, assembly, fitting, serving, then the API. The first import
    of a later stage fails the test with its line."""
    stages, own = LAYOUTS[package]
    names = [name for name, _ in stages] + ["API (the package's __init__)"]
    back = []
    for module, path in modules(package).items():
        mine = stage_of(module)
        for line, target in imports(path, module):
            theirs = stage_of(target)
            if theirs is not None and mine is not None and theirs > mine:
                back.append(f"{path.relative_to(ROOT)}:{line}: {module} ({names[mine]}) imports {target} "
                            f"({names[theirs]}, downstream)")
    assert not back, "\n".join(back)


def test_the_walk_sees_a_back_edge(tmp_path):
    """The check itself: a store module importing the sweep, or the spec importing the study, is caught; a
    training module importing the pipeline, or one importing the objectives API, is caught, while
    ``from objectives import catalog`` is not an import of the API."""
    store, spec = stage_of("dse.store.front"), stage_of("dse.spec.parse")
    assert stage_of("dse.sweep.loop") > store and stage_of("dse.study") > spec
    fake = tmp_path / "front.py"
    fake.write_text("def f():\n    from dse.sweep import run\n    from ..study import Searcher\n")
    found = imports(fake, "dse.store.front")
    assert (2, "dse.sweep") in found and (3, "dse.study") in found
    compute = stage_of("objectives.training.compute")
    assert stage_of("objectives.pipeline") > compute and stage_of("objectives") > stage_of("objectives.serving.step")
    fake.write_text("from objectives import catalog\nfrom objectives import evaluate\nfrom ..pipeline import prepare\n")
    found = imports(fake, "objectives.training.compute")
    assert found == [(1, "objectives.catalog"), (2, "objectives"), (3, "objectives.pipeline")]


@pytest.mark.parametrize("path", sorted([*PACKAGE.rglob("*.py"), *(ROOT / "objectives").rglob("*.py")]),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_400_lines(path):
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(ROOT)} has {n} lines (at most {MAX_LINES}): split it by concept"


def optuna_private_uses(path: Path) -> list[str]:
    """Where ``path`` imports a private Optuna module or name, or reads a private attribute Optuna's
    objects have."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("optuna"):
            if any(part.startswith("_") for part in node.module.split(".")):
                out.append(f"{node.lineno}: from {node.module}")
            out += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Import):
            out += [f"{node.lineno}: import {a.name}" for a in node.names
                    if a.name.startswith("optuna") and any(p.startswith("_") for p in a.name.split("."))]
        elif isinstance(node, ast.Attribute) and node.attr in OPTUNA_PRIVATE:
            out.append(f"{node.lineno}: .{node.attr}")
    return out


def test_optuna_private_names_are_in_one_module():
    outside = {str(p.relative_to(ROOT)): uses for p in sorted(PACKAGE.rglob("*.py"))
               if p != INTERNALS and (uses := optuna_private_uses(p))}
    assert not outside, f"Optuna's private names outside dse/study/internals.py: {outside}"
    inside = optuna_private_uses(INTERNALS)
    assert len(inside) >= 10  # they are all there; its docstring says why each is needed
    doc = ast.get_docstring(ast.parse(INTERNALS.read_text()))
    for name in ("_CONSTRAINTS_KEY", "_storage", "_thread_local", "_get_generation_key", "JournalOperation",
                 "_fast_non_domination_rank", "_crowding_distance_sort", "_get_single_value", "InMemoryStorage"):
        assert name in doc, f"dse/study/internals.py does not say why it uses {name}"
