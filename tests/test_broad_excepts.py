"""Every handler that catches anything (``except Exception``, ``except BaseException``, a bare
``except:``, ``suppress(Exception)``) in ``src/dagspec`` says on its line why anything goes; a
handler that expects something names it instead."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "dagspec"
BROAD = {"Exception", "BaseException"}
# files being reworked elsewhere whose handlers are not audited yet
NOT_AUDITED: set[str] = set()


def _broad(node: ast.expr | None) -> bool:
    return node is None or (isinstance(node, ast.Name) and node.id in BROAD)


def broad_handlers(source: str) -> list[int]:
    """The lines of the handlers that catch anything."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ExceptHandler) and _broad(node.type):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and node.args and len(node.args) == 1:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name == "suppress" and _broad(node.args[0]):
                lines.append(node.lineno)
    return sorted(lines)


def unexplained(source: str, shown_as: str) -> list[str]:
    text = source.splitlines()
    return [f"{shown_as}:{n}: {text[n - 1].strip()}" for n in broad_handlers(source) if "#" not in text[n - 1]]


def test_every_handler_that_catches_anything_says_why() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative not in NOT_AUDITED:
            found += unexplained(path.read_text(), relative)
    assert found == [], "name what the handler expects, or say in a comment on its line why anything goes"


def test_the_check_finds_each_form() -> None:
    source = (
        "try:\n    f()\nexcept Exception:\n    pass\n"
        "try:\n    f()\nexcept BaseException as exc:  # re-raised\n    raise\n"
        "try:\n    f()\nexcept:\n    pass\n"
        "try:\n    f()\nexcept (OSError, ValueError):\n    pass\n"
        "with contextlib.suppress(Exception):\n    f()\n"
        "with suppress(OSError):\n    f()\n"
    )
    assert broad_handlers(source) == [3, 7, 11, 17]
    assert [hit.split(": ")[0] for hit in unexplained(source, "m.py")] == ["m.py:3", "m.py:11", "m.py:17"]
