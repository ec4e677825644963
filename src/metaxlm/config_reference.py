"""The config reference: every key of a run config and of a task config, generated from the schema. `metaxlm configs
reference` prints it; the docs site's hook (docs/hooks/config_reference.py) makes it the page config-reference.md at
every build.

The run config (metaxlm.config.RunConfig) and the task config (metaxlm.finetune.spec.TaskSpec) are
pydantic models; most of their fields are documented by a `#` comment on the field's line or on the lines
just above it.
It walks the models from the root, section by section, and writes for each field its key path, type,
default and that comment, read from the source with ast + tokenize. Nothing is copied by hand, so the page
cannot drift from the code: a new field, a changed default or a reworded comment shows at once.
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import re
import textwrap
import tokenize
import types
import typing
from collections.abc import Iterator

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from metaxlm.config import RunConfig
from metaxlm.finetune.spec import TaskSpec
from metaxlm.registry import load_plugins

# (title, root model, what the keys are relative to)
ROOTS = [
    ("Run config", RunConfig, "a run config file (`metaxlm run CONFIG`, `pretrain`, `evaluate`, ...) or a "
     "`key.sub=value` override"),
    ("Task config", TaskSpec, "a task file (`configs/tasks/<task>.yaml`), an entry of a run config's "
     "`evaluate.tasks.<name>` or a `key=value` override of `metaxlm finetune`"),
]

_CONSTRAINTS = [(annotated_types.Ge, "ge", "≥"), (annotated_types.Gt, "gt", ">"),
                (annotated_types.Le, "le", "≤"), (annotated_types.Lt, "lt", "<")]


# ---- reading the schema

def nested_models(annotation) -> Iterator[tuple[str, type[BaseModel]]]:
    """The models a field's type holds, each with the key suffix that reaches it: '' directly (or in a union),
    '.<name>' as the values of a dict, '[]' as the items of a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield "", annotation
        return
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict:
        for suffix, model in nested_models(args[1]):
            yield ".<name>" + suffix, model
    elif origin in (list, tuple):
        for arg in args:
            for suffix, model in nested_models(arg):
                yield "[]" + suffix, model
    elif origin in (typing.Union, types.UnionType):
        for arg in args:
            yield from nested_models(arg)


def sections(model: type[BaseModel], path: str = "") -> list[tuple[str, type[BaseModel]]]:
    """(key path, model) of `model` and of every model under it, in the order the fields declare them."""
    found = [(path, model)]
    for name, field in model.model_fields.items():
        for suffix, sub in dict.fromkeys(nested_models(field.annotation)):
            found += sections(sub, f"{path}.{name}{suffix}" if path else f"{name}{suffix}")
    return found


def _comment_lines(source: str) -> dict[int, str]:
    """Line number -> comment text (without '#') of every comment in `source`."""
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            out[tok.start[0]] = re.sub(r"noqa\b.*", "", text).strip()
    return out


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """Field name -> its comment: the comment lines right above the field (no blank line between) and the
    comment on the field's own line(s), for fields declared in `model` or in the models it inherits from."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(cls))
        except (OSError, TypeError):
            continue
        lines, comments = source.splitlines(), _comment_lines(source)
        for stmt in ast.parse(source).body[0].body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            above, line = [], stmt.lineno - 1
            while line >= 1 and lines[line - 1].strip().startswith("#"):
                above.insert(0, comments[line])
                line -= 1
            own = [comments[n] for n in range(stmt.lineno, stmt.end_lineno + 1) if n in comments]
            found[stmt.target.id] = _sentences([" ".join(above), " ".join(own)])
    return found


def _sentences(texts: list[str]) -> str:
    """Comment texts as one text, each ending in punctuation before the next begins."""
    texts = [text for text in texts if text]
    ends = [text if i == len(texts) - 1 or text[-1] in ".:;)" else text + ";" for i, text in enumerate(texts)]
    return " ".join(ends)


# ---- writing Markdown

def prose(text: str, in_table: bool = False) -> str:
    """Comment or docstring text as Markdown: `code spans` kept, everything else escaped (a comment's
    `<name>`, `*`, `_` or `{lang}` is text, not markup); pipes escaped in table cells."""
    parts = re.split(r"(`[^`]*`)", text)
    for i, part in enumerate(parts):
        if i % 2 == 0:
            part = part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            part = re.sub(r"([\\*_{}\[\]])", r"\\\1", part)
            if in_table:
                part = part.replace("|", r"\|")
        parts[i] = part
    return "".join(parts)


def anchor(root: str, path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"{root} {path or 'top'}".lower()).strip("-")


def type_parts(annotation) -> list[str | type[BaseModel]]:
    """A type as people read it (`int | None`, `"train" | "load"`, `dict[str, CorpusSpec]`): text, and the
    models it names as classes, so that they can link to their own sections."""
    if annotation is type(None):
        return ["null"]
    if annotation is typing.Any:
        return ["any"]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return [" | ".join(json.dumps(a) for a in args)]
    if origin in (typing.Union, types.UnionType):
        return _joined([type_parts(a) for a in args], " | ")
    if origin is not None:
        return [f"{origin.__name__}[", *_joined([type_parts(a) for a in args], ", "), "]"]
    return [getattr(annotation, "__name__", str(annotation))]


def _joined(groups: list[list], separator: str) -> list:
    out = []
    for i, group in enumerate(groups):
        out += ([separator] if i else []) + group
    return out


def type_markdown(annotation, links: dict[type, str]) -> str:
    """type_parts as code spans, each model a link to its section."""
    out, text = [], ""
    for part in type_parts(annotation) + [None]:
        if isinstance(part, str):
            text += part
            continue
        if text.strip():
            out.append(f"`{text.strip()}`")
        text = ""
        if part is not None:
            out.append(f"[{part.__name__}](#{links[part]})" if part in links else f"`{part.__name__}`")
    return " ".join(out)


def constraint_text(field) -> str:
    bounds = []
    for item in field.metadata:
        for kind, attr, sign in _CONSTRAINTS:
            if isinstance(item, kind):
                bounds.append(f"{sign} {getattr(item, attr)}")
    return ", ".join(bounds)


def plain(value):
    """A default as YAML can write it: tuples as lists, a model as its non-default keys (`{xlm: {}}`)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_defaults=True)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def default_text(field) -> str:
    """The default as it would be written in YAML; 'required' when there is none."""
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "see its section"
    elif field.default is PydanticUndefined:
        return "**required**"
    else:
        value = field.default
    flow = yaml.safe_dump(plain(value), default_flow_style=True, allow_unicode=True, width=10**6).strip()
    return f"`{flow.removesuffix('...').strip()}`"


def section_markdown(root: str, path: str, model: type[BaseModel], links: dict[type, str]) -> list[str]:
    key = f"`{path}`" if path else "top level"
    out = [f"### {key}: {model.__name__} {{ #{anchor(root, path)} }}", ""]
    doc = model.__dict__.get("__doc__")
    if doc:
        out += [prose(" ".join(inspect.cleandoc(doc).split())), ""]
    comments = field_comments(model)
    out += ["| key | type | default | what it is |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        full = f"{path}.{name}" if path else name
        typ = type_markdown(field.annotation, links)
        if bounds := constraint_text(field):
            typ += f" ({prose(bounds)})"
        what = _sentences([field.description or "", comments.get(name, "")])
        out.append(f"| `{full}` | {typ} | {default_text(field)} | {prose(what, in_table=True)} |")
    return out + [""]


def component_sections() -> list[tuple[str, str, type[BaseModel]]]:
    """(title, key path, Options model) of every registered objective, and of every model architecture that
    has options, as registered now: a plugin imported before (`plugins`) is listed like a built-in piece."""
    from metaxlm.registry import ARCHS, OBJECTIVES

    found = [("Objective options", f"train.objectives.{name}", OBJECTIVES.get(name).Options)
             for name in OBJECTIVES.names()]
    found += [(f"Model options: {name}", "model.options", ARCHS.get(name).Options)
              for name in ARCHS.names() if ARCHS.get(name).Options.model_fields]
    return found


def reference_markdown(plugins: list[str] = ()) -> str:
    out = [
        "# Config reference",
        "",
        "Generated from the config schema (`metaxlm configs reference` prints it; this site builds it at every "
        "build): `src/metaxlm/config_reference.py` reads the pydantic models of `src/metaxlm/config/schema.py`, "
        "`src/metaxlm/finetune/spec.py` and `src/metaxlm/finetune/hyperparameters.py`, and each "
        "field's comment from the source, so it is always the code's. How configs are read, overridden and "
        "recorded: [Configs](configs.md). Defaults are shown as YAML (`null` is none); `<name>` in a key is "
        "a name of your choosing (a variant, a language, a corpus, an evaluation set).",
        "",
    ]
    for title, root, where in ROOTS:
        found = sections(root)
        links = {model: anchor(title, path) for path, model in reversed(found)}
        out += [f"## {title}", "", f"Keys of {prose(where)}.", ""]
        out += [f"- [{f'`{path}`' if path else 'top level'}](#{anchor(title, path)})" for path, _ in found]
        out.append("")
        for path, model in found:
            out += section_markdown(title, path, model, links)
    load_plugins(list(plugins))
    out += ["## Options of registered pieces", "",
            "Each objective (`train.objectives.<name>: {...}`; a number is its `weight`) and each model architecture "
            "(`model.options` with `model.arch: <name>`) declares its options as its `Options` model; "
            "`load_config` checks them, naming a misspelt key and the piece's options. A plugin's pieces "
            "(`plugins:`) are listed once imported (`metaxlm configs reference --plugin MODULE`).", ""]
    for title, path, model in component_sections():
        out += section_markdown(title, path, model, {})
    return "\n".join(out)
