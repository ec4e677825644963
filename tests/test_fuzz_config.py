"""Fuzzing the config loader with hypothesis: any YAML file and any `key=value` override give a RunConfig or a
ConfigError, never another exception or a hang (an input using more than 5 s of CPU time; see fuzz_helpers.py).

Inputs: random bytes and text (invalid UTF-8, NUL, control characters); YAML documents that are a valid run
config with generated values at known and unknown keys (huge integers, impossible dates, infinities and NaN,
tags, binary, strings with control characters or lone surrogates) and the classic hostile YAML (deep nesting, an
alias holding itself, a billion-laughs alias tree); and generated overrides, alone and on a config file. A config
that loads must also survive being saved (`dump_config`, as every run saves config.yaml) and load back the same.

Budget: each of the 4 fuzz tests below tries FUZZ_EXAMPLES inputs (fuzz_helpers.py: 150, so 600 generated inputs
per run; METAXLM_FUZZ_EXAMPLES=2000 runs a deeper search), and test_every_hostile_snippet_at_every_exposed_key tries
all 8 x 44 = 352 pairs of an exposed key and a hostile snippet (hypothesis draws the last ones of a list rarely).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from fuzz_helpers import CPU_SECONDS_PER_INPUT, cpu_time_limit, fuzz, tally
from hypothesis import strategies as st

from metaxlm.config import RunConfig, apply_override, dump_config, load_config, read_yaml
from metaxlm.errors import ConfigError
from metaxlm.textpolicy import text_problem

# Keys of a run config (and a few unknown ones): generated values land where validation must look at them.
KEY_PATHS = [
    "output_dir", "seed", "scale", "plugins", "stages", "data", "data.languages", "data.mono", "data.mono.de",
    "data.parallel", "data.alpha", "data.skip_bad", "data.pivot", "vocab.size", "vocab.mode", "vocab.path",
    "prepare.num_proc", "model.hidden", "model.heads", "model.options", "model.options.x", "train.steps", "train.lr",
    "train.betas", "train.batch_tokens", "train.eps", "train.objectives", "train.objectives.mlm", "variants.v",
    "variants.v.train", "variants.v.train.steps", "variants.v.model", "variants.v.start_from", "run_variants",
    "meta.path", "evaluate.tasks", "evaluate.tasks.t.x", "evaluate.seeds", "evaluate.layers", "report.findings.xlm",
    "unknown", "data.unknown", "a.b.c.d",
]
# YAML scalars and snippets with a history of breaking loaders, besides generated text.
HOSTILE_YAML = [
    "1" * 5000, "-0x" + "f" * 5000, "2020-13-45", "0000-01-01", "2001-12-14t21:59:43.10+99:00", ".inf", "-.inf",
    ".nan", "1e999", "!!binary aGVsbG8=", "!!binary /w==", "!!python/object/apply:os.system [echo]", "!!float abc",
    "!!int x", "!!set {a, b}", "!!omap [a: 1]", '"a\\0b"', '"\\ud800"', '"\\e[31m"', '"\\x7f"', '"tab\\there"', "~",
    "yes", "0x1F", "0o17", "1_000", "[a, b", "{a: 1}", "&a x", "*a", "|", "- a", "%YAML 1.1", "---", "...", "? a",
    "@", "`", "x: y: z", "'", "&a [*a]", "&a {k: *a}",
    # nested past Python's stack (PyYAML's composer recurses twice a level; 700 levels > its 1,000 frames): deeper
    # only costs time, quadratic in PyYAML's scanner (2,000 levels: 5 s a load on a loaded 2-core CI)
    "[" * 700 + "]" * 700,
    # a billion laughs: nine levels of nine aliases each
    "[" + ", ".join(f"&l{i} [{', '.join([f'*l{i - 1}' if i else 'lol'] * 9)}]" for i in range(9)) + "]",
]
# Where a value is kept as given (Any-typed sections) or reaches arithmetic: the hostile snippets are tried there too.
EXPOSED_KEY_PATHS = ["model.options.x", "evaluate.tasks.t.x", "variants.v.train.objectives.mlm.x",
                     "variants.v.model.options.x", "train.objectives.mlm", "scale", "seed", "output_dir"]
BASE = {"output_dir": '"runs/x"', "data": {"languages": "[en, de]", "mono": '"corpus/{lang}.txt"'}}

yaml_value = st.one_of(st.sampled_from(HOSTILE_YAML), st.text(max_size=20),
                       st.text(max_size=12).map(json.dumps),  # a double-quoted YAML string: escapes, surrogates
                       st.integers().map(str), st.floats().map(str))
key_path = st.one_of(st.sampled_from(KEY_PATHS), st.lists(st.text(max_size=6), min_size=1, max_size=3).map(".".join))
change = st.one_of(st.tuples(key_path, yaml_value),
                   st.tuples(st.sampled_from(EXPOSED_KEY_PATHS), st.sampled_from(HOSTILE_YAML)))


def put_at(tree: dict, path: str, value: str) -> None:
    """Put `value` (YAML source) at the dotted `path`, replacing anything in the way."""
    *parents, last = path.split(".")
    for part in parents:
        if not isinstance(tree.get(part), dict):
            tree[part] = {}
        tree = tree[part]
    tree[last] = value


def emit(tree: dict, indent: int = 0) -> str:
    """YAML source of a tree whose leaves are YAML source already; keys are quoted, so any text can be a key."""
    out = []
    for key, value in tree.items():
        head = " " * indent + json.dumps(key) + ":"
        out.append(head + "\n" + emit(value, indent + 2) if isinstance(value, dict) and value else f"{head} {value}\n")
    return "".join(out)


def texts_in(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in texts_in(key) + texts_in(item)]
    if isinstance(value, list | tuple | set):
        return [text for item in value for text in texts_in(item)]
    return []


def loads_or_config_error(path: Path | None, overrides: list[str] = ()) -> RunConfig | None:
    """The loaded config, or None for a ConfigError; any other exception propagates and fails the test."""
    try:
        return load_config(path, overrides)
    except ConfigError:
        return None


def assert_usable(config: RunConfig, tmp: str) -> None:
    """A loaded config holds no text against the readers' policy, and is saved with its run: saving must work,
    and the saved file must load back the same."""
    assert not any(text_problem(text, multiline=True) for text in texts_in(config.model_dump()))
    saved, again = Path(tmp) / "config.yaml", Path(tmp) / "again.yaml"
    dump_config(config, saved)
    reloaded = load_config(saved)
    dump_config(reloaded, again)
    assert again.read_text(encoding="utf-8") == saved.read_text(encoding="utf-8")


@fuzz(st.one_of(st.binary(max_size=300), st.text(max_size=300).map(lambda text: text.encode("utf-8", "surrogatepass")),
                 st.sampled_from(HOSTILE_YAML).map(str.encode)))
def test_fuzz_load_config_any_bytes(content):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.yaml"
        path.write_bytes(content)
        if (config := loads_or_config_error(path)) is not None:
            assert_usable(config, tmp)


@fuzz(st.lists(change, max_size=4))
def test_fuzz_load_config_yaml_documents(changes):
    tree = json.loads(json.dumps(BASE))
    for path, value in changes:
        put_at(tree, path, value)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.yaml"
        path.write_text(emit(tree), encoding="utf-8", errors="surrogatepass")
        if (config := loads_or_config_error(path)) is not None:
            assert_usable(config, tmp)


def test_every_hostile_snippet_at_every_exposed_key():
    """The finite part of the search, done exhaustively: each hostile snippet at each exposed key."""
    for path in EXPOSED_KEY_PATHS:
        for value in HOSTILE_YAML:
            tree = json.loads(json.dumps(BASE))
            put_at(tree, path, value)
            tally("test_every_hostile_snippet_at_every_exposed_key")
            with tempfile.TemporaryDirectory() as tmp, cpu_time_limit(CPU_SECONDS_PER_INPUT):
                config_file = Path(tmp) / "run.yaml"
                config_file.write_text(emit(tree), encoding="utf-8")
                if (config := loads_or_config_error(config_file)) is not None:
                    assert_usable(config, tmp)


override = st.one_of(st.builds(lambda key_value: "=".join(key_value), change), st.text(max_size=30))


@fuzz(st.lists(override, max_size=3), st.booleans())
def test_fuzz_overrides_on_a_config(overrides, with_file):
    with tempfile.TemporaryDirectory() as tmp:
        path = None
        if with_file:
            path = Path(tmp) / "run.yaml"
            path.write_text(emit(BASE), encoding="utf-8")
        if (config := loads_or_config_error(path, overrides)) is not None:
            assert_usable(config, tmp)


@fuzz(override)
def test_fuzz_apply_override_sets_the_parsed_value(text):
    tree = {"data": {"languages": ["en"]}, "seed": 0}
    try:
        apply_override(tree, text)
    except ConfigError:
        return
    key, raw = text.split("=", 1)
    node = tree
    for part in key.strip().split("."):
        node = node[part]
    assert same(node, read_yaml(raw) if raw.strip() else "")  # YAML, with exponent numbers as numbers


def same(a: object, b: object) -> bool:
    """Equal as YAML values: NaN equals NaN, and each pair of containers is compared once, so that aliases shared
    a billion times or holding themselves take no longer than their source. Iterative: a value nested as deep as
    the loader allows is compared without exhausting the stack."""
    compared: set[tuple[int, int]] = set()
    pending = [(a, b)]
    while pending:
        a, b = pending.pop()
        if isinstance(a, float) and isinstance(b, float):
            if not (a == b or (a != a and b != b)):
                return False
        elif isinstance(a, list | dict) and type(a) is type(b):
            if (id(a), id(b)) in compared:
                continue
            compared.add((id(a), id(b)))
            if len(a) != len(b):
                return False
            pending.extend(zip(a.items(), b.items(), strict=True) if isinstance(a, dict) else zip(a, b, strict=True))
        elif isinstance(a, tuple) and isinstance(b, tuple):  # a dict's (key, value)
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b, strict=True))
        elif not (type(a) is type(b) and a == b):
            return False
    return True
