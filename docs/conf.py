"""Sphinx configuration of dse's documentation site (MyST Markdown; `make docs`, tests/test_docs.py).

Built with warnings as errors: a page outside every toctree, a missing page, a broken cross-reference or
a docstring autodoc cannot import fails the build.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # autodoc imports dse and objectives from the checkout

project = "dse"
author = "the dse authors"
copyright = "the dse authors, Apache-2.0"

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
# what is not a page: the build's output, and any README.md in a folder under docs/
exclude_patterns = ["_build", "**/README.md", "Thumbs.db", ".DS_Store"]

# headings h1-h3 get anchors, so that `architecture.md#the-design-table` resolves
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_typehints = "description"

#: links the Markdown files make to files outside docs/ that a page of the site includes (on GitHub the file
#: itself opens; here its page does)
INCLUDED_PAGES = {"../results/README.md": "results.md"}


def _included_pages(app, docname, source):
    for target, page in INCLUDED_PAGES.items():
        source[0] = source[0].replace(f"]({target})", f"]({page})")


def setup(app):
    app.connect("source-read", _included_pages)


html_theme = "alabaster"
html_title = "dse: design-space exploration for AI GPU clusters"
html_static_path: list[str] = []
