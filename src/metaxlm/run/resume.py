"""What a stopped command (Ctrl-C, SIGTERM) tells its user about going on: whether rerunning it resumes, and how.

Said only where it is true: `metaxlm run` and `metaxlm evaluate` keep what they finished and continue what they
were doing (stage stamps, pretraining checkpoints, evaluation parts); `metaxlm finetune` keeps the finished
(language, seed) runs in its --out and a long run's checkpoints; `metaxlm pretrain` continues only with --resume, from
a checkpoint it has written (named, with its step). The other commands redo their work: nothing is said.
"""

from __future__ import annotations

import json
from pathlib import Path

from metaxlm.io import latest_checkpoint

RERUN = "rerun the same command to resume"
KEPT = {"run": f"{RERUN} (finished stages and variants are kept; pretraining continues from its last checkpoint)",
        "evaluate": f"{RERUN} (finished parts and fine-tuning runs are kept)",
        "finetune": f"{RERUN} (the finished language and seed runs in --out are kept)"}


def how_to_resume(args) -> str:
    """The clause the CLI adds to its "interrupted" line for the parsed command `args` ("" where a rerun does not
    resume). Never fails: the user is leaving, a second Ctrl-C included."""
    try:
        if args.command == "pretrain":
            return _pretrain_hint(args)
        if args.command == "run" and getattr(args, "recompute", None):
            return (f"rerun it without --recompute to resume (with it, {', '.join(args.recompute)} would be "
                    f"pretrained from the start again)")
        return KEPT.get(args.command, "")
    except (Exception, KeyboardInterrupt):  # an unreadable config or checkpoint: nothing sure to say
        return ""


def _pretrain_hint(args) -> str:
    from metaxlm.config import load_config
    from metaxlm.packaged import find_config
    from metaxlm.run.layout import RunDir

    cfg = load_config(find_config(args.config), args.overrides)  # as the command read it: a file or a packaged name
    variant = args.variant or next(iter(cfg.variants))
    checkpoint = latest_checkpoint(RunDir.of(cfg).variant(variant).ckpt)
    if checkpoint is None:
        return f"{variant} had written no checkpoint yet: a rerun starts it again"
    step = json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))["step"]
    where = f"{variant} from step {step} (checkpoint {checkpoint})"
    if args.resume and not args.resume_from:
        return f"{RERUN} {where}"
    return f"rerun it with --resume{' instead of --resume-from' if args.resume_from else ''} to continue {where}"
