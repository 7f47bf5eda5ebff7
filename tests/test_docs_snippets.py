"""Every ```python block of README.md and docs/*.md compiles, uses no undefined name, and (slow) runs.

The convention (also in the README, "Documentation"):

* the ```python blocks of one page are **one script**, run in order in one namespace, like a notebook: a block
  may use what an earlier block of the same page defined, never a name that no block defines;
* a block right after the line ``<!-- snippet: assumes model, proposal, start -->`` is a sketch that takes those
  names as given (the reader's model, a test built elsewhere on the page): its other names are checked as above,
  and it is not executed (nor is a block after ``<!-- snippet: no-run -->``, which assumes nothing: a multi-process
  launch, a paper-scale run, an optional package).

The default suite compiles every block and checks each page's script for undefined names with pyflakes' rule F821
through ruff (in the ``dev`` extra), a fraction of a second per page; ``--runslow`` also executes each page's
runnable blocks in a fresh interpreter in an empty folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_MARKER = re.compile(r"^<!--\s*snippet:\s*(?:(?P<norun>no-run)|assumes\s*(?P<names>[\w\s,]*?))\s*-->$")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int  # 1-based line, in the page, of the block's first line of code
    code: str
    runs: bool  # False after a `<!-- snippet: assumes ... -->` or `<!-- snippet: no-run -->` line
    assumes: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def snippets(page: Path) -> list[Snippet]:
    """The ```python blocks of a Markdown page, in order (indented fences, as inside a list, included)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence, info = opening["indent"], opening["fence"], opening["info"].strip()
        body, end = [], index + 1
        while end < len(lines):
            closing = _FENCE.match(lines[end])
            if (
                closing
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            body.append(lines[end][len(indent) :] if lines[end].startswith(indent) else lines[end].lstrip())
            end += 1
        language = info.split()[0].lower() if info else ""
        if language in ("python", "py", "python3"):
            previous = next((lines[j].strip() for j in range(index - 1, -1, -1) if lines[j].strip()), "")
            marker = _MARKER.match(previous)
            assumes = tuple(re.findall(r"\w+", marker["names"] or "")) if marker else ()
            found.append(Snippet(page, index + 2, "\n".join(body) + "\n", marker is None, assumes))
        index = end + 1
    return found


def page_script(page: Path, *, for_execution: bool) -> str:
    """The page's blocks as one script, each block on its own lines of the page (an error's line is the page's).

    To check names, every block is in, and a block's assumed names are assigned on its fence line; to execute,
    only the blocks that run."""
    out: list[str] = []
    for snippet in snippets(page):
        if for_execution and not snippet.runs:
            continue
        out.extend([""] * (snippet.line - 2 - len(out)))
        out.append(" = ".join([*snippet.assumes, "None"]) if snippet.assumes else "")
        out.extend(snippet.code.splitlines())
    return "\n".join(out) + "\n"


PAGES_WITH_CODE = [page for page in PAGES if snippets(page)]
_IDS = [str(page.relative_to(ROOT)) for page in PAGES_WITH_CODE]


def test_the_pages_have_snippets():
    assert len(PAGES_WITH_CODE) >= 10, PAGES_WITH_CODE
    assert ROOT / "README.md" in PAGES_WITH_CODE


def test_the_extraction():
    page = ROOT / "README.md"
    blocks = snippets(page)
    assert blocks[0].code.startswith("import jax.numpy as jnp\n"), blocks[0]
    assert all(not block.code.startswith("pip install") for block in blocks)  # ```bash blocks are not Python


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=_IDS)
def test_every_block_compiles(page):
    for snippet in snippets(page):
        try:
            compile(snippet.code, snippet.where, "exec")
        except SyntaxError as error:
            pytest.fail(f"{snippet.where}: {error}")


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=_IDS)
def test_no_undefined_names(page):
    """pyflakes' undefined-name rule (ruff F821) on the page's script: a name no block defines fails here, also in
    blocks too slow, or not meant, to execute."""
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--isolated",
            "--select",
            "F821",
            "--output-format",
            "concise",
            "--stdin-filename",
            # named as Python: ruff reads a ``.md`` file as Markdown and passed every page unchecked
            f"{page.relative_to(ROOT)}.py",
            "-",
        ],
        input=page_script(page, for_execution=False),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if checked.returncode not in (0, 1):
        pytest.fail(f"ruff did not run (it is in the dev extra: pip install -e '.[dev]'):\n{checked.stderr}")
    assert checked.returncode == 0, (
        "names used but never defined by this page's ```python blocks (define them in an earlier block, or, for a "
        "sketch that takes them as given, put `<!-- snippet: assumes name, name -->` on the line before its fence; "
        f"line numbers are the page's):\n{checked.stdout}{checked.stderr}"
    )


RUNNABLE = [page for page in PAGES_WITH_CODE if any(snippet.runs for snippet in snippets(page))]


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=[str(page.relative_to(ROOT)) for page in RUNNABLE])
def test_page_runs(page, tmp_path):
    """The page's runnable blocks run to the end in a fresh interpreter (an empty working folder, headless
    matplotlib); line numbers in a traceback are the page's."""
    script = tmp_path / page.name.replace(".md", "_md.py")
    script.write_text(page_script(page, for_execution=True), encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "agg"}
    ran = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800
    )
    assert ran.returncode == 0, f"{page.relative_to(ROOT)}:\n{ran.stderr[-4000:]}"


def test_the_api_reference_lists_every_public_name():
    """docs/api/tallmcmc.md lists every name of ``tallmcmc.__all__`` and docs/api/modules.md every public
    sub-package, so that a new public name gets its reference page (the build then fails on a broken docstring)."""
    import types

    import tallmcmc

    listed = set(re.findall(r"^   (\w+)$", (ROOT / "docs" / "api" / "tallmcmc.md").read_text(encoding="utf-8"), re.M))
    modules = set(re.findall(r"^   (tallmcmc[\w.]*)$", (ROOT / "docs" / "api" / "modules.md").read_text("utf-8"), re.M))
    missing = [
        name
        for name in tallmcmc.__all__
        if (
            f"tallmcmc.{name}" not in modules
            if isinstance(getattr(tallmcmc, name), types.ModuleType)
            else name not in listed
        )
    ]
    assert not missing, f"public names without an API reference entry (docs/api/): {missing}"
