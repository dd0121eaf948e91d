"""The documentation stands on its own: links and file references in docs/ and the top-level pages resolve inside the
repository, and nothing in the repository points at documents a user who clones it does not have."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "SECURITY.md")]
    + [*(ROOT / "docs").glob("*.md")]
)

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.MULTILINE)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)
# A file named in prose or code: at least one folder, a known extension (`broker/log/log.py`, `docs/x.md`).
FILE_REFERENCE = re.compile(
    r"(?<![\w./$~<>@:-])((?:[A-Za-z0-9_][\w.-]*/)+[\w.-]+\.(?:py|pyi|md|proto|toml|yml|yaml|json|sh|service|cfg|j2))"
    r"(?![\w/-])"
)
# A folder named in code: `broker/log/`, `tests/sim/` (checked when it starts with a top-level folder).
DIR_REFERENCE = re.compile(r"`((?:[A-Za-z0-9_][\w.-]*/)+)`")
EXTERNAL = ("http://", "https://", "mailto:")

# Spelled in pieces so that this file does not itself contain what it looks for.
FORBIDDEN = [
    re.compile(re.escape("DESIGN" + ".md")),
    re.compile(re.escape(".." + "/shared")),
    re.compile(re.escape("/" + "work/")),
    re.compile("\u00a7" + r"\s*\d"),  # section numbers of a document that is not here
]
GENERATED = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.replace("`", "").strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for match in HEADING.finditer(FENCE.sub("", page.read_text())):
        base = slug(match.group(2))
        name, n = base, 0
        while name in found:
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


def link_problems(page: Path, root: Path = ROOT) -> list[str]:
    """Every relative link of ``page`` that does not resolve to a file (and heading) inside the repository."""
    text = FENCE.sub("", page.read_text())
    problems = []
    for target in [*INLINE_LINK.findall(text), *REFERENCE_LINK.findall(text)]:
        if target.startswith(EXTERNAL):
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.is_relative_to(root):
            problems.append(f"{target}: outside the repository")
        elif not resolved.exists():
            problems.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: no heading #{anchor} in {resolved.relative_to(root)}")
    return problems


def reference_problems(page: Path, root: Path = ROOT) -> list[str]:
    """File paths named in ``page`` (prose or code) that are not in the repository.

    A path starting with a top-level folder (``broker/log/log.py``) must exist from the root. Any other may also
    be relative to the page or to a folder the text has just named (``group_vars/all.yml`` from ``deploy/ansible/``),
    so it must then be the tail of some file's path."""
    files = [str(p.relative_to(root)) for p in repository_files(root)]
    top = {f.split("/", 1)[0] for f in files}
    problems = []
    text = page.read_text()
    tracked = set(files)
    here = page.parent.relative_to(root)
    for name in sorted(set(FILE_REFERENCE.findall(text))):
        # Only what git tracks counts: a build output present on one machine is absent from a fresh clone.
        if name in tracked or os.path.normpath(here / name) in tracked:
            continue
        if name.split("/", 1)[0] in top or not any(f.endswith("/" + name) for f in files):
            problems.append(f"{name}: no such file in the repository")
    for name in sorted(set(DIR_REFERENCE.findall(text))):
        if name.split("/", 1)[0] in top and not (root / name).is_dir():
            problems.append(f"{name}: no such folder in the repository")
    return problems


@functools.cache
def repository_files(root: Path = ROOT) -> list[Path]:
    """The files git tracks (so not the virtualenv, caches or a developer's untracked files), minus generated code."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    names = [n for n in listed.decode().split("\0") if n]
    return [root / n for n in names if not n.endswith(GENERATED) and (root / n).is_file()]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_and_file_references_resolve(page: Path) -> None:
    assert link_problems(page) + reference_problems(page) == []


def test_the_index_lists_every_page() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    missing = [p.name for p in PAGES if p.parent.name == "docs" and p.name != "README.md" and f"({p.name}" not in index]
    assert missing == []


def test_no_file_points_outside_the_repository() -> None:
    offending = []
    for path in repository_files():
        text = path.read_bytes().decode("utf-8", errors="replace")
        for pattern in FORBIDDEN:
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                offending.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)}")
    assert offending == []


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """A broken link, a missing heading, a missing file and a reference outside the repository are all reported."""
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "deploy" / "ansible").mkdir(parents=True)
    (repo / "deploy" / "ansible" / "site.yml").write_text("")
    page = repo / "docs" / "page.md"
    page.write_text(
        "# Title\n\n## Second `part`\n\n[ok](#title) [ok](page.md#second-part) [ok](../deploy/ansible/site.yml)\n"
        "[gone](#nowhere) [file](nofile.md) [up](../../etc/passwd)\n\n"
        "```sh\n# Not a heading\n```\n[in code](#not-a-heading)\n"
        "See `deploy/ansible/site.yml`, `ansible/site.yml`, `deploy/gone.yml` and `ansible/gone.yml`.\n"
        "Folders: `deploy/ansible/`, `record/` (relative), `deploy/gone/`.\n"
    )
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    assert link_problems(page, repo) == [
        "#nowhere: no heading #nowhere in docs/page.md",
        "nofile.md: no such file",
        "../../etc/passwd: outside the repository",
        "#not-a-heading: no heading #not-a-heading in docs/page.md",
    ]
    assert reference_problems(page, repo) == [
        "ansible/gone.yml: no such file in the repository",
        "deploy/gone.yml: no such file in the repository",
        "deploy/gone/: no such folder in the repository",
    ]
    assert slug('Spark: `format("odradek")`') == "spark-formatodradek"
    assert slug("chaos, demo") == "chaos-demo"
    assert any(p.search("see " + "DESIGN" + ".md section 3") for p in FORBIDDEN)
    assert any(p.search("../.." + "/shared/reference/x.txt") for p in FORBIDDEN)
    assert any(p.search("\u00a7" + "4.8") for p in FORBIDDEN)
