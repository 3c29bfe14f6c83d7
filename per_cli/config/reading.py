"""Reading a config file into plain data, safely: whatever the bytes, one line and no hang."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import yaml

from per_cli.errors import ConfigError

# libyaml's parser where PyYAML has it: the same nodes as the pure-Python one, much faster on a large file
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# far above any real config (the shipped ones are under 3 KB), far below what makes parsing slow
MAX_CONFIG_BYTES = 1_000_000
# values (scalars, lists, mappings) the document expands to once aliases are followed
MAX_EXPANDED_NODES = 100_000
# characters of scalars it expands to: no more than the largest file read without aliases holds (a 500 KB string
# repeated 99,000 times is under the value limit, yet 50 GB once the loader builds it and preflight dumps it)
MAX_EXPANDED_CHARS = MAX_CONFIG_BYTES


class Expansion(NamedTuple):
    """What a node costs once every alias in it is followed: its values (scalars, lists, mappings) and the
    characters of its scalars."""

    values: int
    chars: int


# what a config may expand to
CONFIG_LIMIT = Expansion(MAX_EXPANDED_NODES, MAX_EXPANDED_CHARS)


def _expanded_size(node: yaml.Node, sizes: dict[int, Expansion], open_: set[int], limit: Expansion) -> Expansion:
    """What the tree ``node`` expands to, each distinct node counted once and remembered, up to past ``limit``;
    ConfigError for an alias inside its own anchor."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise ConfigError("an alias refers to the value that contains it (a recursive YAML alias)")
    open_.add(key)
    total = Expansion(1, len(node.value) if isinstance(node, yaml.ScalarNode) else 0)
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        children = (
            (child for pair in node.value for child in pair) if isinstance(node, yaml.MappingNode) else node.value
        )
        for child in children:
            sub = _expanded_size(child, sizes, open_, limit)
            total = Expansion(total.values + sub.values, total.chars + sub.chars)
            if total.values > limit.values or total.chars > limit.chars:
                break
    open_.discard(key)
    sizes[key] = total
    return total


def _find_duplicate_key(node: yaml.Node, prefix: str, seen_nodes: set[int]) -> tuple[str, int] | None:
    """The first key given twice in one mapping (dotted, with its line), or None: YAML keeps the last value silently.
    A node reached again through an alias is not walked again (linear in the file)."""
    if id(node) in seen_nodes:
        return None
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            dotted = f"{prefix}{key}"
            if key is not None and key != "<<":
                if key in seen:
                    return dotted, key_node.start_mark.line + 1
                seen.add(key)
            found = _find_duplicate_key(value_node, dotted + ".", seen_nodes)
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found = _find_duplicate_key(item, f"{prefix.rstrip('.')}[{i}].", seen_nodes)
            if found:
                return found
    return None


def parse_yaml(path: Path | str, text: str, limit: Expansion = CONFIG_LIMIT) -> Any:
    """The document in ``text`` as plain data; ConfigError (naming ``path``, a file or ``--set k=v``) for malformed
    YAML, a duplicate key or aliases that expand past ``limit`` (a file that per writes passes :func:`file_limit`)."""
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            size = _expanded_size(node, {}, set(), limit)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}; write the value out instead") from None
        if size.values > limit.values:
            raise ConfigError(
                f"{path}: its YAML aliases expand to more than {limit.values:,} values (nested aliases?); "
                "a config needs no more than a few hundred, so write the values out"
            )
        if size.chars > limit.chars:
            raise ConfigError(
                f"{path}: its YAML aliases expand to more than {limit.chars / 1_000_000:g} MB of text (a long value "
                "repeated by aliases?); a config is a few KB, so write the values out"
            )
        duplicate = _find_duplicate_key(node, "", set())
        if duplicate:
            key, line = duplicate
            raise ConfigError(f"{path}: duplicate key '{key}' at line {line}; give each key once")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        if "nesting depth" in problem:  # libyaml's own limit (1,000 levels)
            raise ConfigError(f"{path}: its values nest too deep to be a config; flatten them") from None
        raise ConfigError(f"{path}: malformed YAML{where}: {problem}") from None
    except RecursionError:  # nesting thousands deep ([[[[...]]]]): no config is like that
        raise ConfigError(f"{path}: its values nest too deep to be a config; flatten them") from None
    finally:
        loader.dispose()


def file_limit(text: str) -> Expansion:
    """The limit for a file that per writes (a grid's grid.yaml grows with its runs): what the text could hold
    without any alias (a value takes at least a character), and at least :data:`CONFIG_LIMIT`."""
    return Expansion(max(MAX_EXPANDED_NODES, len(text)), max(MAX_EXPANDED_CHARS, len(text)))


def read_text(path: Path) -> str:
    """The file's text, read once (a growing file cannot slip past the size check): ConfigError for a directory, a
    missing or unreadable file, one over :data:`MAX_CONFIG_BYTES`, or bytes that are not UTF-8."""
    try:
        if path.is_dir():
            raise ConfigError(f"config {path}: is a directory; give a YAML file (per configs lists the shipped ones)")
        if not path.is_file():
            raise ConfigError(f"config file not found: {path} (give an existing YAML file or a name from per configs)")
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"config {path}: cannot be read ({exc.strerror or exc}); give a readable YAML file") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{path}: the file is over {MAX_CONFIG_BYTES // 1_000_000} MB; a config is a few KB of YAML "
            "(is this the right file?)"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}: byte {raw[exc.start]:#04x} at line {line} is not UTF-8; save the config as UTF-8 text"
        ) from None
