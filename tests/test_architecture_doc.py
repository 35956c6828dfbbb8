"""docs/architecture.md lists every module of ``src/dagspec`` and every folder of the repository.

Each is a list entry of its own, ``- `job/main.py`: ...`` (modules relative to ``src/dagspec``),
``- `bench/`: ...`` (top-level folders), so the doc cannot drift from the code unnoticed.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "dagspec"
DOC = REPO / "docs" / "architecture.md"
# hidden folders that are part of the repository (the others are tools' caches)
HIDDEN_FOLDERS = (".ci",)

_ENTRY = re.compile(r"^- `([^`\s]+)`", re.MULTILINE)


def listed(text: str) -> set[str]:
    """The names the doc's list entries start with."""
    return set(_ENTRY.findall(text))


def modules(src: Path) -> set[str]:
    """Every module of the package but the ``__init__.py`` files, relative to it."""
    return {p.relative_to(src).as_posix() for p in src.rglob("*.py") if p.name != "__init__.py"}


def folders(repo: Path) -> set[str]:
    """The repository's top-level folders: the visible ones .gitignore does not name, and the hidden ones it keeps."""
    ignored = [line.strip().rstrip("/") for line in (repo / ".gitignore").read_text().splitlines()]
    ignored = [pattern for pattern in ignored if pattern and not pattern.startswith("#")]
    found = {
        p.name
        for p in repo.iterdir()
        if p.is_dir() and not p.name.startswith(".") and not any(fnmatch.fnmatch(p.name, g) for g in ignored)
    }
    return {f"{name}/" for name in found | {name for name in HIDDEN_FOLDERS if (repo / name).is_dir()}}


def missing(text: str, src: Path, repo: Path) -> list[str]:
    return sorted((modules(src) | folders(repo)) - listed(text))


def stale(text: str, src: Path, repo: Path) -> list[str]:
    """Listed modules and folders that do not exist."""
    names = {name for name in listed(text) if name.endswith((".py", "/"))}
    return sorted(name for name in names if not (src / name).exists() and not (repo / name).exists())


def test_every_module_and_folder_is_in_the_architecture_doc() -> None:
    text = DOC.read_text()
    assert missing(text, SRC, REPO) == [], "add a line `- `<path>`: <its one job>` to docs/architecture.md"
    assert stale(text, SRC, REPO) == [], "docs/architecture.md lists what no longer exists"


def test_the_check_sees_a_module_or_folder_left_out(tmp_path: Path) -> None:
    src = tmp_path / "src" / "pkg"
    (src / "job").mkdir(parents=True)
    for name in ("__init__.py", "job/__init__.py", "job/main.py", "job/extra.py", "errors.py"):
        (src / name).write_text("")
    for name in ("bench", ".ci", ".cache", "build", "src"):
        (tmp_path / name).mkdir(exist_ok=True)
    (tmp_path / ".gitignore").write_text("# caches\nbuild/\n")
    text = "- `errors.py`: errors\n- `job/main.py`: the entry\n- `src/`: code\n- `gone.py`: old\n"
    assert missing(text, src, tmp_path) == [".ci/", "bench/", "job/extra.py"]
    assert stale(text, src, tmp_path) == ["gone.py"]
