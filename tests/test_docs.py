"""The documentation: the site under docs/ builds with warnings as errors (a missing page, a page outside
every toctree, a broken cross-reference or a docstring autodoc cannot import fails), every link between its
pages lands on a page and an anchor that exist, every key a space file may hold is in the space reference,
and every relative link of README.md resolves."""

from __future__ import annotations

import html.parser
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from dse.spec import Vocabulary
from dse.spec.facility import KEYS as FACILITY_KEYS
from dse.spec.prices import GPU_PRICE_KEYS
from dse.spec.schema import RANGE_KEYS, SAMPLERS, SCALES, SEARCH_KEYS, TOP_KEYS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REFERENCE = DOCS / "space-reference.md"
#: a constraint's operators (dse.spec.schema.CONSTRAINT_RE)
CONSTRAINT_OPS = ("<=", ">=", "<", ">")
#: label columns whose values are catalog-sized lists, listed by `dse catalog instances` instead
LISTED_BY_CATALOG = {"instance", "rental_instance"}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built as `make docs` builds it (-W: a warning is an error), into a temporary folder."""
    out = tmp_path_factory.mktemp("docs") / "html"
    doctrees = out.parent / "doctrees"
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d", str(doctrees),
                          str(DOCS), str(out)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, f"sphinx-build -W failed:\n{run.stdout}\n{run.stderr}"
    return out


def test_the_site_builds_with_warnings_as_errors(site):
    assert (site / "index.html").is_file()
    for page in ("user-guide", "space-reference", "validation", "api"):
        assert (site / f"{page}.html").is_file(), page


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


def test_every_link_between_pages_lands_on_a_page_and_an_anchor(site):
    """Sphinx checks that a linked page exists; MyST does not check the anchor of a link to another page
    (`user-guide.md#no-such-heading`), so the built pages' links are followed here."""
    pages = {}
    for path in site.rglob("*.html"):
        parser = _Links()
        parser.feed(path.read_text(encoding="utf-8"))
        pages[path] = parser
    broken = []
    for path, parser in pages.items():
        if "_modules" in path.parts:
            continue
        for href in parser.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith("mailto:"):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if parts.path and not target.exists():
                broken.append(f"{path.relative_to(site)}: {href} (no such file)")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in pages[target].ids:
                broken.append(f"{path.relative_to(site)}: {href} (no such anchor)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def _table_keys(text: str) -> set[str]:
    """The names in backticks in the first column of every Markdown table of ``text``."""
    keys: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("|") or re.fullmatch(r"\|[\s|:-]+\|?", line):
            continue
        first = re.split(r"(?<!\\)\|", line)[1]
        keys.update(re.findall(r"`([^`]+)`", first))
    return keys


def test_every_space_key_is_in_the_space_reference():
    """Every key the parser accepts (top level, search, range, the price file's) and every column a space may
    set under workload or cluster is a row of a table of docs/space-reference.md; the samplers, scales,
    constraint operators and the values of every label column are on the page."""
    text = REFERENCE.read_text(encoding="utf-8")
    documented = _table_keys(text)
    vocab = Vocabulary.from_objectives()
    expected = {
        "top-level keys (dse.spec.schema.TOP_KEYS)": set(TOP_KEYS),
        "search keys (SEARCH_KEYS)": {f"search.{k}" for k in SEARCH_KEYS},
        "range keys (RANGE_KEYS)": set(RANGE_KEYS),
        "facility keys (dse.spec.facility.KEYS)": set(FACILITY_KEYS),
        "workload / cluster columns (objectives.INPUT_COLUMNS)": set(vocab.input_columns),
        "mapping columns": set(vocab.mapping_columns),
        "price file keys (dse.spec.prices)": set(GPU_PRICE_KEYS) | set(vocab.labels.get("pricing", ())),
    }
    missing = {what: sorted(keys - documented) for what, keys in expected.items() if keys - documented}
    assert not missing, f"{REFERENCE.relative_to(ROOT)} does not document: " + "; ".join(
        f"{what}: {', '.join(keys)}" for what, keys in missing.items())

    quoted = set(re.findall(r"(?<!`)`([^`\n]+)`(?!`)", text))  # code spans, not fences
    values = {"samplers": set(SAMPLERS), "scales": set(SCALES), "constraint operators": set(CONSTRAINT_OPS)}
    values.update({f"values of {column}": set(labels) for column, labels in vocab.labels.items()
                   if column not in LISTED_BY_CATALOG})
    absent = {what: sorted(v - quoted) for what, v in values.items() if v - quoted}
    assert not absent, f"{REFERENCE.relative_to(ROOT)} does not name: " + "; ".join(
        f"{what}: {', '.join(v)}" for what, v in absent.items())


def test_the_space_reference_documents_no_key_the_parser_refuses():
    """A column or key the reference's tables name is one the parser accepts (a removed or renamed key
    is taken out of the page with it)."""
    vocab = Vocabulary.from_objectives()
    known = (set(TOP_KEYS) | {f"search.{k}" for k in SEARCH_KEYS} | set(RANGE_KEYS) | set(vocab.input_columns)
             | set(vocab.mapping_columns) | set(GPU_PRICE_KEYS) | set(vocab.labels.get("pricing", ())))
    names = {k for k in _table_keys(REFERENCE.read_text(encoding="utf-8")) if re.fullmatch(r"[a-z_][a-z0-9_.]*", k)}
    stale = sorted(names - known)
    assert not stale, f"{REFERENCE.relative_to(ROOT)} documents keys the parser does not accept: {', '.join(stale)}"


def test_every_relative_link_of_the_readme_resolves():
    readme = ROOT / "README.md"
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", readme.read_text(encoding="utf-8")):
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or not parts.path:
            continue
        if not (ROOT / unquote(parts.path)).exists():
            broken.append(target)
    assert not broken, f"README.md links to files that do not exist: {', '.join(broken)}"
