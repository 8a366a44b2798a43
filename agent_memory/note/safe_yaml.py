"""Front matter as plain data, read safely: YAML that keeps keys as written (``on:``,
``2024:``) and an alias budget (``limits.MAX_YAML_ALIAS_EXPANSION``) checked before anything
is built. The simple front matter nearly every note has takes the fast path (``fast_yaml``)
instead, so this module, and PyYAML with it, is imported only when that path declines.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import frontmatter
import yaml

from .. import limits  # read at call time: tests lower the budget
from .render import to_utc


_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML has it


class KeepKeysLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """Safe YAML loader that keeps mapping keys as written.


    Plain YAML 1.1 turns the key ``on:`` into ``True`` and ``2024:`` into an int, which
    makes python-frontmatter raise ``TypeError``; a human's key is a name, so keep it.
    """


    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = key_node.value
            else:
                key = json.dumps(jsonable(self.construct_object(key_node, deep=True)))
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


    def get_single_data(self) -> Any:
        # Composed nodes share what an alias names; built into Python objects they still
        # do, but everything downstream (``jsonable``, JSON in the index) copies them. So
        # the expansion is measured on the nodes, before anything is built.
        node = self.get_single_node()
        if node is None:
            return None
        _check_alias_expansion(node)
        return self.construct_document(node)


KeepKeysLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, KeepKeysLoader.construct_mapping
)


class AliasBudgetExceeded(yaml.YAMLError):
    """The front matter's aliases expand beyond ``limits.MAX_YAML_ALIAS_EXPANSION``."""


def _node_weight(node: yaml.Node) -> int:
    return 1 + len(node.value) if isinstance(node, yaml.ScalarNode) else 1


def _node_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_alias_expansion(root: yaml.Node) -> None:
    """Raise ``AliasBudgetExceeded`` if expanding every alias would add more than the
    budget (nodes plus scalar characters) to what is written, or never end (an alias
    inside the node it names). Linear in the composed nodes: each shared node's
    expanded size is computed once; no recursion, so deep nesting cannot overflow."""
    budget = limits.MAX_YAML_ALIAS_EXPANSION
    expanded: dict[int, int] = {}  # id(node) -> weight of the node with its aliases expanded
    written = 0
    open_nodes: set[int] = set()  # the nodes whose subtree is being walked (the current path)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            expanded[key] = _node_weight(node) + sum(expanded[id(c)] for c in _node_children(node))
            continue
        if key in expanded:
            continue
        if key in open_nodes:
            raise AliasBudgetExceeded("a YAML alias (*name) refers to a node that contains it, so it never ends")
        open_nodes.add(key)
        written += _node_weight(node)
        stack.append((node, True))
        stack.extend((c, False) for c in _node_children(node) if id(c) not in expanded)
    added = expanded[id(root)] - written
    if added > budget:
        raise AliasBudgetExceeded(
            f"its YAML aliases (*name) would expand it by {added:,} nodes and characters, over the limit of {budget:,}"
        )


def load_yaml(fm_text: str, problems: list[str]) -> tuple[dict[str, Any], bool]:
    """The front matter as plain data, and whether it could not be read as written, by
    the full parser (``parse.read_front_matter`` tries the fast path first)."""
    try:
        loaded = frontmatter.YAMLHandler().load(fm_text, Loader=KeepKeysLoader)
        if isinstance(loaded, dict):
            return {k: jsonable(v) for k, v in loaded.items()}, False
    except AliasBudgetExceeded as exc:
        problems.append(f"front matter refused: {exc}; write the values out instead of &anchors and *aliases")
        return {}, True
    except (yaml.YAMLError, ValueError, OverflowError, RecursionError) as exc:
        # ValueError: a value YAML recognises but cannot build (``when: 2026-02-30``);
        # RecursionError: nesting deeper than Python's stack.
        first = str(exc).strip().splitlines() or [type(exc).__name__]
        problems.append("broken YAML front matter: " + " ".join(line.strip() for line in first[:3]))
        return {}, True
    if loaded is not None or any(line.strip() and not line.lstrip().startswith("#") for line in fm_text.splitlines()):
        kind = "null" if loaded is None else f"a {type(loaded).__name__}"  # ``~`` or ``null``: keys added after it break it
        problems.append(f"front matter must be a mapping of keys, not {kind}")
        return {}, True
    return {}, False  # comments only


def jsonable(value: Any) -> Any:
    """YAML gives datetimes, dates and sets; the index and JSON output want plain data."""
    if isinstance(value, dt.datetime):
        try:
            return to_utc(value) if value.tzinfo else value.isoformat()
        except ValueError:  # no UTC form (year 1 east of Greenwich): kept as written, flagged on read
            return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value
