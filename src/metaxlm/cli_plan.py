"""The `plan`, `status` and `list` commands (registered by metaxlm.cli): what a run will do, what it is doing, and
what a config can name."""

from __future__ import annotations

import argparse
from functools import partial

LISTS = ("tasks", "objectives", "archs", "languages")


def cmd_plan(args, load) -> None:
    from metaxlm.plan import format_plan, plan_run

    print(format_plan(plan_run(load(args), tuple(args.recompute))))


def cmd_status(args) -> None:
    from metaxlm.plan import format_status, run_status

    print(format_status(run_status(args.run_dir)))


def _table(rows: list[tuple[str, str]], indent: str = "  ") -> list[str]:
    width = max((len(name) for name, _ in rows), default=0)
    return [f"{indent}{name:<{width}}  {text}".rstrip() for name, text in rows]


def _list_tasks() -> list[str]:
    from metaxlm.finetune.spec import load_task_spec
    from metaxlm.finetune.tasks import TASKS
    from metaxlm.packaged import description, names, packaged

    lines = ["task types (a task definition's `type`):", *_table([(n, TASKS.description(n)) for n in TASKS.names()]),
             "", "task definitions (metaxlm finetune NAME; a run config's evaluate.tasks.<name>.task):"]
    rows = []
    for name in names("task"):
        spec = load_task_spec(name)
        rows.append((name, f"{spec.type}, {spec.metric}, {len(spec.languages)} languages: "
                           f"{description(packaged('task', name))}"))
    return lines + _table(rows)


def _list_objectives() -> list[str]:
    from metaxlm.pretrain.objectives import OBJECTIVES

    return ["objectives (train.objectives: {NAME: weight}), each with the batches it reads:",
            *_table([(n, f"[{OBJECTIVES.get(n).batch_kind}] {OBJECTIVES.description(n)}") for n in OBJECTIVES.names()])]


def _list_archs() -> list[str]:
    from metaxlm.models.arch import ARCHS

    return ["model architectures (model.arch):", *_table([(n, ARCHS.description(n)) for n in ARCHS.names()])]


def _list_languages(query: str | None) -> list[str]:
    from metaxlm.languages import iso639_1_languages, three_letter_code_count

    found = iso639_1_languages()
    if query:
        found = {c: n for c, n in found.items() if query.lower() in f"{c} {n}".lower()}
    return [f"languages (data.languages): {len(found):,} two-letter ISO 639-1 codes"
            + (f" matching {query!r}" if query else ""), *_table(sorted(found.items())),
            f"and {three_letter_code_count():,} three-letter ISO 639-3 codes (e.g. grc: Ancient Greek), and BCP-47 "
            f"tags with a script where the data needs one (zh-Hant, sr-Latn)"]


def cmd_list(args) -> None:
    if args.query and args.what != "languages":
        from metaxlm.errors import MetaXLMError

        raise MetaXLMError(f"list {args.what}: takes no search text (only `list languages TEXT` does)")
    lines = {"tasks": _list_tasks, "objectives": _list_objectives, "archs": _list_archs}.get(args.what)
    print("\n".join(lines() if lines else _list_languages(args.query)))


def register(sub: argparse._SubParsersAction, add_config_args, load) -> None:
    """Add `plan`, `status` and `list` to the `metaxlm` command line; `add_config_args` and `load` are how every
    config-driven command takes its config and overrides and reads them (metaxlm.cli)."""
    p = sub.add_parser("plan", help="what `metaxlm run CONFIG` would do, without running or writing anything",
                       description="The stages; each variant's start, objectives, steps, tokens and precision; the "
                                   "evaluation's tasks × languages × seeds and probes; what is already done in the "
                                   "output directory and will be reused (or would be refused); an ETA from the run's "
                                   "timings.json.")
    add_config_args(p)
    p.add_argument("--recompute", action="append", default=[], metavar="VARIANT",
                   help="plan as `metaxlm run --recompute VARIANT` would run")
    p.set_defaults(func=partial(cmd_plan, load=load))

    p = sub.add_parser("status", help="what a run directory has done, is doing (with its step) and has left")
    p.add_argument("run_dir", help="a run's output directory (it has the config.yaml the run wrote)")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("list", help="what a config can name: tasks, objectives, archs, languages")
    p.add_argument("what", choices=LISTS)
    p.add_argument("query", nargs="?", help="languages: only those whose code or name contains this text")
    p.set_defaults(func=cmd_list)
