"""Safe YAML loading that keeps where every value came from.

``yaml.safe_load`` silently keeps the last of two duplicate keys and forgets line numbers. We
compose the node graph with libyaml's safe loader (fast, and it never builds Python objects from
tags) and build plain data ourselves, recording the position of every key and value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dagspec.errors import SpecIssue, YamlSourceError

try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - libyaml is in every wheel we pin
    from yaml import SafeLoader as _SafeLoader

MAX_SPEC_BYTES = 1_000_000
MAX_NODES = 100_000  # far beyond any real spec; stops alias-expansion bombs early
MAX_DEPTH = 100  # nesting levels; a spec needs a handful, and building the data recurses once per level

_STANDARD_TAGS = {
    "tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "merge")
}

_STR_TAG = "tag:yaml.org,2002:str"
# Keys SafeConstructor.flatten_mapping rewrites: `<<` merges and the `=` value key.
_FLATTENED_KEY_TAGS = ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value")

Location = tuple[str | int, ...]


@dataclass
class YamlDocument:
    """Plain data from a YAML file plus the (line, column) of every key and value in it."""

    file: str
    data: Any
    value_positions: dict[Location, tuple[int, int]] = field(default_factory=dict)
    key_positions: dict[Location, tuple[int, int]] = field(default_factory=dict)

    def position(self, location: Location, *, prefer_key: bool = False) -> tuple[int, int]:
        """Best known position for a location: its own, else the nearest enclosing one."""
        loc = tuple(location)
        while True:
            table = (self.key_positions, self.value_positions) if prefer_key else (self.value_positions,)
            for positions in table:
                if loc in positions:
                    return positions[loc]
            if not loc:
                return (1, 1)
            loc = loc[:-1]


class _Builder:
    def __init__(self, file: str) -> None:
        self.file = file
        self.doc = YamlDocument(file=file, data=None)
        self.constructor = yaml.constructor.SafeConstructor()
        self.nodes_seen = 0
        self.issues: list[SpecIssue] = []
        self.open_nodes: dict[int, yaml.Node] = {}  # the collections being built (the path from the root)

    def _issue(self, node: yaml.Node, message: str, location: Location = ()) -> None:
        mark = node.start_mark
        self.issues.append(SpecIssue(self.file, mark.line + 1, mark.column + 1, _dotted(location), message))

    def build(self, node: yaml.Node, location: Location) -> Any:
        self.nodes_seen += 1
        if self.nodes_seen > MAX_NODES:
            raise _TooManyNodesError(node)
        self.doc.value_positions.setdefault(location, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.ScalarNode) and node.tag == _STR_TAG:
            # Most values are strings; this is what SafeConstructor.construct_yaml_str returns,
            # without its bookkeeping (a third of the loading time of a typical spec).
            return node.value
        if node.tag not in _STANDARD_TAGS:
            self._issue(node, f"tag {node.tag!r} is not allowed (plain YAML only)", location)
            return None
        if isinstance(node, yaml.ScalarNode):
            try:
                return self.constructor.construct_object(node, deep=True)
            except yaml.constructor.ConstructorError as exc:
                self._issue(node, str(exc.problem), location)
                return None
        if id(node) in self.open_nodes:
            # `a: &a [*a]`: an alias to a collection that contains it would expand forever
            anchor = node.start_mark
            self._issue(
                node,
                f"recursive alias: this value contains itself (the anchor at line {anchor.line + 1}, "
                f"column {anchor.column + 1})",
                location,
            )
            return None
        if len(self.open_nodes) >= MAX_DEPTH:
            raise _TooDeepError(node)
        self.open_nodes[id(node)] = node
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.build(item, (*location, i)) for i, item in enumerate(node.value)]
            if isinstance(node, yaml.MappingNode):
                return self._build_mapping(node, location)
        finally:
            del self.open_nodes[id(node)]
        raise AssertionError(f"unexpected YAML node {node!r}")  # pragma: no cover

    def _build_mapping(self, node: yaml.MappingNode, location: Location) -> dict[str, Any]:
        explicit = {id(k) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"}
        if any(k.tag in _FLATTENED_KEY_TAGS for k, _ in node.value):  # a no-op otherwise
            try:
                self.constructor.flatten_mapping(node)  # resolves `<<: *anchor` merges
            except yaml.constructor.ConstructorError as exc:
                self._issue(node, str(exc.problem), location)
                return {}
        result: dict[str, Any] = {}
        explicit_seen: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self._issue(key_node, "mapping keys must be plain scalars", location)
                continue
            key = key_node.value if key_node.tag == _STR_TAG else str(self.constructor.construct_object(key_node))
            child = (*location, key)
            if id(key_node) in explicit:
                if key in explicit_seen:
                    first = self.doc.key_positions.get(child, (0, 0))
                    self._issue(key_node, f"duplicate key {key!r} (first defined on line {first[0]})", child)
                    continue
                explicit_seen.add(key)
            self.doc.key_positions[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            result[key] = self.build(value_node, child)
        return result


class _TooManyNodesError(Exception):
    def __init__(self, node: yaml.Node) -> None:
        self.node = node


class _TooDeepError(_TooManyNodesError):
    pass


def _dotted(location: Location) -> str:
    parts: list[str] = []
    for part in location:
        parts.append(f"[{part}]" if isinstance(part, int) else ("." if parts else "") + str(part))
    return "".join(parts)


def dotted_location(location: Location) -> str:
    """``("stages", "raw", "params", "path")`` -> ``"stages.raw.params.path"``."""
    return _dotted(location)


def load_yaml_text(text: str, file: str) -> YamlDocument:
    """Parse one YAML document from text, raising YamlSourceError with every problem found."""
    if len(text.encode("utf-8", errors="replace")) > MAX_SPEC_BYTES:
        raise YamlSourceError([SpecIssue(file, 1, 1, "", f"file is larger than {MAX_SPEC_BYTES} bytes")])
    try:
        root = yaml.compose(text, Loader=_SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise YamlSourceError([SpecIssue(file, line, col, "", f"invalid YAML: {problem}")]) from None
    except yaml.YAMLError as exc:
        raise YamlSourceError([SpecIssue(file, 1, 1, "", f"invalid YAML: {exc}")]) from None
    builder = _Builder(file)
    if root is None:
        return builder.doc
    try:
        builder.doc.data = builder.build(root, ())
    except _TooManyNodesError as exc:
        mark = exc.node.start_mark
        message = (
            f"nested more than {MAX_DEPTH} levels deep; refusing"
            if isinstance(exc, _TooDeepError)
            else f"more than {MAX_NODES} values after expanding aliases; refusing (alias bomb?)"
        )
        raise YamlSourceError([SpecIssue(file, mark.line + 1, mark.column + 1, "", message)]) from None
    if builder.issues:
        raise YamlSourceError(builder.issues)
    return builder.doc


def load_yaml_file(path: str | Path, display_name: str | None = None) -> YamlDocument:
    """Read and parse a YAML file; the size limit is checked before reading it all."""
    path = Path(path)
    name = display_name or str(path)
    size = path.stat().st_size
    if size > MAX_SPEC_BYTES:
        raise YamlSourceError([SpecIssue(name, 1, 1, "", f"file is {size} bytes, larger than {MAX_SPEC_BYTES}")])
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise YamlSourceError([SpecIssue(name, 1, 1, "", f"not UTF-8 text: {exc.reason}")]) from None
    return load_yaml_text(text, name)
