"""The README stays a front door, and no link in README.md, CHANGELOG.md or docs/ leads nowhere or
out of the repository (a reader of a fresh clone must be able to follow every one)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_MAX_LINES = 200

# [text](target) and ![alt](target); a target ends at whitespace or ')' (an optional "title" after
# it is ignored). Reference-style definitions: [name]: target
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # https:, mailto:, ...


def written_docs() -> list[Path]:
    """README.md, CHANGELOG.md and every Markdown page under docs/ (the guides, the decisions,
    and the generated reports and results, whose links must resolve too)."""
    pages = [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in pages if p.is_file()]


def links(text: str) -> list[str]:
    """Link targets of a Markdown text, outside code blocks and inline code."""
    text = INLINE_CODE.sub("", FENCE.sub("", text))
    return INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text)


def anchors(markdown: Path) -> set[str]:
    """The heading anchors GitHub makes for a Markdown file (lower case, punctuation dropped,
    spaces to hyphens), plus explicit ``<a id=...>`` / ``<a name=...>`` anchors."""
    text = FENCE.sub("", markdown.read_text(encoding="utf-8"))
    found = set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def broken(page: Path, target: str) -> str | None:
    """Why ``target`` (a link in ``page``) does not resolve inside the repository, or None."""
    if EXTERNAL.match(target) or target.startswith("//"):
        return None
    path_part, _, fragment = target.partition("#")
    resolved = page if not path_part else (page.parent / path_part).resolve()
    try:
        resolved.relative_to(ROOT)
    except ValueError:
        return f"{target} leaves the repository"
    if not resolved.exists():
        return f"{target} does not exist"
    if fragment and resolved.suffix == ".md" and resolved.is_file():
        if fragment.lower() not in anchors(resolved):
            return f"{target}: no heading #{fragment} in {resolved.relative_to(ROOT)}"
    return None


def test_readme_is_short():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= README_MAX_LINES, (
        f"README.md has {n} lines; keep it <= {README_MAX_LINES} (guides go to docs/)"
    )


def test_readme_starts_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    first_block = FENCE.search(text)
    assert first_block is not None
    assert "./scripts/bootstrap.sh && .venv/bin/seqrec demo" in first_block.group(0)
    assert "./scripts/bootstrap.sh && .venv/bin/python -m pytest -n auto" in first_block.group(0)


@pytest.mark.parametrize("page", written_docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(page: Path):
    problems = [why for t in links(page.read_text(encoding="utf-8")) if (why := broken(page, t))]
    assert not problems, f"{page.relative_to(ROOT)}: " + "; ".join(problems)


def test_the_link_check_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The checker itself: a missing file, a link out of the repository and a missing heading
    are each reported; code spans and external URLs are not links to check."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title here\n\n## Setting up\n", encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text("x", encoding="utf-8")
    assert broken(page, "docs/a.md") is None
    assert broken(page, "docs/a.md#setting-up") is None
    assert "does not exist" in broken(page, "docs/b.md")
    assert "leaves the repository" in broken(page, "../shared/DESIGN.md")
    assert "no heading" in broken(page, "docs/a.md#nothing")
    assert broken(page, "https://example.org/x") is None
    assert links("see `[x](nowhere.md)` and [y](docs/a.md)\n```\n[z](gone.md)\n```\n") == [
        "docs/a.md"
    ]


def readme_blocks(language: str) -> list[str]:
    """The README's fenced code blocks in ``language``."""
    text = README.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


@pytest.mark.slow
def test_readme_quickstart_commands_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """The quickstart's commands run as written, in a fresh folder (the shipped dataset only):
    all but those that need the reader's own file (``shop.csv``) or keep running (``serve``);
    trainings get one epoch to stay quick."""
    from seqrec.cli.main import main

    block = readme_blocks("bash")[1]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    commands = [c for c in commands if c.startswith("seqrec ")]
    assert any(c.startswith("seqrec train") for c in commands)
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    monkeypatch.chdir(tmp_path)
    ran = 0
    for command in commands:
        if "shop" in command or command.startswith("seqrec serve"):
            continue
        args = command.split()[1:]
        target = None
        if ">" in args:  # seqrec config sasrec > sasrec.toml
            target = args[args.index(">") + 1]
            args = args[: args.index(">")]
        if args[0] == "train" and "-c" in args:
            args += ["--set", "train.epochs=1"]
        capsys.readouterr()
        assert main(args) == 0, command
        out = capsys.readouterr().out
        if target:
            (tmp_path / target).write_text(out, encoding="utf-8")
        ran += 1
    assert ran >= 6
    assert "[model]" in (tmp_path / "sasrec.toml").read_text(encoding="utf-8")


@pytest.mark.slow
def test_readme_python_quickstart_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The quickstart's Python block runs as written (one epoch instead of five)."""
    code = readme_blocks("python")[0]
    assert "epochs=5" in code
    monkeypatch.chdir(tmp_path)
    exec(compile(code.replace("epochs=5", "epochs=1"), "README.md", "exec"), {})
    assert (tmp_path / "models" / "ml-sasrec").is_dir()
