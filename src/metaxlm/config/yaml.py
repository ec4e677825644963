"""YAML as configs are read: safe loading only, numbers in exponent notation as people write them (`5e-4`, `1e4`,
`2.0e-5`; YAML 1.1, which PyYAML follows, reads the first two as strings), `key.sub=value` overrides, and the checks
that keep what YAML can express but no run needs (binary data, huge integers, "billion laughs" aliases, control
characters) out of a config."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from metaxlm.errors import ConfigError
from metaxlm.textpolicy import text_problem


class _ConfigLoader(yaml.SafeLoader):
    """yaml.SafeLoader reading exponent notation without a dot or an exponent sign (`5e-4`, `1e4`, `3E5`) as a
    number: a float, or an int when the text has no dot and its value is whole (`1e4` is 10000, so it fits an int
    field such as train.steps)."""


_EXPONENT_NUMBER = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
_ConfigLoader.add_implicit_resolver("tag:metaxlm,2026:number", _EXPONENT_NUMBER, list("-+0123456789."))


def _exponent_number(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | float:
    text = loader.construct_scalar(node).replace("_", "")
    value = float(text)
    return int(value) if "." not in text and value.is_integer() and abs(value) < 2**63 else value


_ConfigLoader.add_constructor("tag:metaxlm,2026:number", _exponent_number)


def _mapping_without_repeats(loader: yaml.SafeLoader, node: yaml.MappingNode):
    """A mapping whose keys are each written once: YAML's last-one-wins would drop the first value unsaid (two
    `train:` sections, one of them lost). Keys a merge (`<<: *base`) brings may be set again: that is what it is for."""
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} given twice (first at line {seen[key].start_mark.line + 1}); keep one",
                key_node.start_mark)
        seen[key] = key_node
    return (yield from loader.construct_yaml_map(node))


_ConfigLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_repeats)


def read_yaml(text: str) -> Any:
    """YAML text as Python values, safely (no tags that build objects), with numbers as people write them."""
    return yaml.load(text, Loader=_ConfigLoader)  # noqa: S506 (a SafeLoader subclass: safe_load with one resolver)


# What yaml.safe_load raises besides YAMLError: its constructors call int(), float() and date() on what its
# resolvers matched (a 5000-digit integer, `!!float abc`, 2020-13-45), and deep nesting exhausts the stack.
_YAML_ERRORS = (yaml.YAMLError, ValueError, RecursionError)


def _yaml_problem(err: Exception, in_file: bool = True) -> str:
    """What is wrong, in one line; PyYAML's own text spans lines and names the text `"<unicode string>"`. Where
    (`in_file`) the caller names the line and column of the problem, the context says where it started; in a
    one-line override value, the character of the problem."""
    if isinstance(err, RecursionError):
        return "nested too deeply"
    if isinstance(err, yaml.MarkedYAMLError) and err.problem:
        problem, start = err.problem, err.context_mark
        if in_file:
            if err.context and start is not None:
                problem += f" ({err.context} that starts at line {start.line + 1}, column {start.column + 1})"
        else:
            at = [err.context] if err.context else []
            if err.problem_mark is not None:
                at.append(f"at character {err.problem_mark.column + 1}")
            problem += f" ({', '.join(at)})" if at else ""
        return problem
    return " ".join(str(err).split("; use sys.set_int_max_str_digits")[0].split())  # advice for programmers


def yaml_error(err: Exception, source: str | Path) -> ConfigError:
    """A YAML error of the file `source` as one line naming the file, and the line and column where PyYAML
    noticed it (`my.yaml:3:5: not valid YAML: mapping values are not allowed here`)."""
    mark = getattr(err, "problem_mark", None)
    where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(source)
    return ConfigError(f"{where}: not valid YAML: {_yaml_problem(err)}")


# What YAML can express but no run config needs, and what would break saving the config with its run or using it.
_MAX_VALUES = 100_000  # after expanding aliases (configs/ hold at most 231); "billion laughs" take hours to save
_MAX_INT_BITS = 64  # seeds, steps, sizes; Python prints no integer of more than 4300 digits
_MAX_DEPTH = 64  # nesting levels (configs/ nest at most 6); pydantic refuses to save a config nested a few hundred


def _check_values(tree: dict[str, Any]) -> None:
    """Raise ValueError naming the key of the first value a run cannot use: text against the readers' policy on
    control characters (`text_problem`), binary data (!!binary), integers past 64 bits, containers nested more
    than _MAX_DEPTH levels, a YAML alias inside the value it names, or aliases expanding the config to more than
    _MAX_VALUES values."""
    sizes: dict[int, int] = {}  # values under each container: one that aliases share is walked once
    walking: set[int] = set()

    def walk(node: Any, key: str, depth: int = 0) -> int:
        if isinstance(node, str):
            if problem := text_problem(node, multiline=True):
                raise ValueError(f"{key}: {problem}")
            return 1
        if isinstance(node, bytes):
            raise ValueError(f"{key}: binary data is not a config value")
        if isinstance(node, int) and node.bit_length() > _MAX_INT_BITS:
            raise ValueError(f"{key}: integer of more than {_MAX_INT_BITS} bits")
        if not isinstance(node, dict | list | tuple | set):
            return 1
        if id(node) in walking:
            raise ValueError(f"{key}: a YAML alias inside the value it names")
        if depth >= _MAX_DEPTH:
            # the key of a list nested 64 deep is .0 64 times
            where = key if len(key) <= 60 else key[:60].rsplit(".", 1)[0] + "…"
            raise ValueError(f"{where or 'top level'}: nested more than {_MAX_DEPTH} levels deep")
        if id(node) not in sizes:
            walking.add(id(node))
            total = 1
            for name, value in node.items() if isinstance(node, dict) else enumerate(node):
                if isinstance(node, dict):  # a key is a value too, named by repr: it may hold the control character
                    walk(name, f"{key or 'top level'}: key {name!r}", depth + 1)
                total += walk(value, f"{key}.{name}" if key else str(name), depth + 1)
            walking.discard(id(node))
            sizes[id(node)] = total
        return sizes[id(node)]

    if (size := walk(tree, "")) > _MAX_VALUES:
        raise ValueError(f"YAML aliases expand the config to {size:,} values (at most {_MAX_VALUES:,})")


def apply_override(tree: dict[str, Any], override: str) -> None:
    """Apply one `a.b.c=value` override to a nested dict (value parsed as a YAML scalar/flow)."""
    if "=" not in override:
        raise ConfigError(f"command-line override {override!r} is not of the form key.sub=value")
    key, raw = override.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ConfigError(f"command-line override {override!r}: empty key part")
    try:
        value = read_yaml(raw) if raw.strip() else ""
    except _YAML_ERRORS as err:
        raise ConfigError(f"command-line override {override}: cannot parse the value: "
                          f"{_yaml_problem(err, in_file=False)}") from None
    node = tree
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"command-line override {override}: {'.'.join(parts[: i + 1])} is not a section")
        node = child
    node[parts[-1]] = value


def dump_config(config: BaseModel, path: Path) -> None:
    from metaxlm.io import atomic_write_text

    atomic_write_text(path, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, allow_unicode=True))
