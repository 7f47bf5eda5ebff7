"""Sphinx configuration of the tallmcmc documentation site.

Build (after ``pip install -e '.[docs]'``), warnings as errors::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Fast mode (the gallery's scripts are not executed; everything else is built)::

    python -m sphinx -W --keep-going -D plot_gallery=0 -b html docs docs/_build/html
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT / "src"))  # the checkout's package even without `pip install -e .`

# The gallery runs inside this process; two XLA host devices let the "many chains and devices" example show a
# mesh on a CPU-only machine (it must be set before JAX is imported, which conf.py does not do).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
os.environ.setdefault("MPLBACKEND", "agg")

project = "tallmcmc"
author = "the tallmcmc authors"
copyright = "2025, the tallmcmc authors"
release = version = "0.1.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = [
    "_build",
    "**.ipynb_checkpoints",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.json",
    "auto_examples/*.md5",
    "auto_examples/*.codeobj.json",
]
templates_path = ["_templates"]

# Markdown pages (the user guide is today's docs/*.md): headings get anchors so `page.md#a-heading` resolves;
# $…$ and $$…$$ are math.
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_fence_as_directive = []

# API reference from the numpydoc-style docstrings.
autosummary_generate = True
autosummary_ignore_module_all = False  # a module's __all__ says what it exports
autosummary_imported_members = False
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_preserve_defaults = True
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True

# Gallery: examples/gallery/plot_*.py, executed at build time (small sizes) unless `-D plot_gallery=0`.
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples" / "gallery"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
    "min_reported_time": 1,
    "show_memory": False,
    "capture_repr": ("_repr_html_", "__repr__"),
    "write_computation_times": True,
}

html_theme = "pydata_sphinx_theme"
html_title = "tallmcmc"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "navbar_align": "left",
}
html_show_sourcelink = False


# ---------------------------------------------------------------------------------------------------------------
# Docstrings are written for the terminal as much as for this site: |x| is an absolute value (not a reST
# substitution) and every docstring numbers its own references from [1]. Before reST parses a docstring (after
# napoleon), escape those bars outside literals, roles and math, and give each docstring's footnotes labels of its
# own (auto-numbered on the page), so that two docstrings on one page do not both define footnote 1.
import re  # noqa: E402

_INLINE = re.compile(r"(``.+?``|:[\w:+-]+:`[^`]*`|`[^`]*`_{0,2})")
_FOOTNOTE = re.compile(r"^(\s*)\.\. \[(\d+)\]")
_FOOTNOTE_REFERENCE = re.compile(r"\[(\d+)\]_")


def _escape_bars(text: str) -> str:
    parts = _INLINE.split(text)
    return "".join(part if index % 2 else part.replace("|", r"\|") for index, part in enumerate(parts))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


_SHARED_FIELD = re.compile(r"^(?P<indent>\s*):(?P<kind>ivar|param) (?P<names>\w+(?:, \w+)+): ?(?P<rest>.*)$")


def _split_shared_fields(lines):
    """``:ivar a, b: text`` (numpydoc's "a, b" entry) as one field per name: reST would read "a," as b's type."""
    index = 0
    while index < len(lines):
        match = _SHARED_FIELD.match(lines[index])
        if not match:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() and _indent(lines[end]) > len(match["indent"]):
            end += 1
        names = match["names"].split(", ")
        width = len(match["kind"]) + 3
        body = [line.strip() for line in lines[index + 1 : end]]
        replacement = []
        for field in names:
            pad = " " * (len(match["indent"]) + width + len(field))
            replacement.append(f"{match['indent']}:{match['kind']} {field}: {match['rest']}")
            replacement.extend(pad + line for line in body)
        lines[index:end] = replacement
        index += len(replacement)


def _process_docstring(app, what, name, obj, options, lines):
    _split_shared_fields(lines)
    label = re.sub(r"[^\w.]", "-", name)
    literal_indent = None  # inside a literal or math block: the indent of the line that opened it
    for index, line in enumerate(lines):
        stripped = line.strip()
        if literal_indent is not None:
            if not stripped or _indent(line) > literal_indent:
                continue
            literal_indent = None
        if stripped.startswith(".. math::") or stripped.startswith(".. code") or stripped.endswith("::"):
            literal_indent = _indent(line)
            if stripped.startswith(".. math::") or stripped == "::":
                continue
        line = _FOOTNOTE.sub(lambda m: f"{m[1]}.. [#{label}-{m[2]}]", line)
        line = _FOOTNOTE_REFERENCE.sub(lambda m: f"[#{label}-{m[1]}]_", line)
        lines[index] = _escape_bars(line)


# A docstring may list references it does not cite in its text (numpydoc's References section).
suppress_warnings = ["ref.footnote"]


def setup(app):
    app.connect("autodoc-process-docstring", _process_docstring, priority=600)  # after napoleon (500)
