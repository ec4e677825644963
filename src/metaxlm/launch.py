"""`python -m metaxlm.launch`: torchrun, with its failures to start said in one line.

    python -m metaxlm.launch --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST0:29400 \\
        --rdzv-id=RUN --rdzv-conf=join_timeout=300 -m metaxlm.cli pretrain CONFIG

Takes exactly torchrun's arguments and runs torchrun's own code (`torch.distributed.run`). What it adds: when the
nodes of a multi-node run do not all arrive at the rendezvous within its join timeout (a node not started, a wrong
endpoint or run id), the node that waited ends with one line naming the rendezvous and what to check, instead of
torchrun's traceback. Everything else (the workers' output, their failures, torchrun's exit status) is torchrun's.
"""

from __future__ import annotations

import sys


def rendezvous_problem(args) -> str:
    """The one line for a rendezvous that timed out, from torchrun's parsed arguments."""
    conf = dict(item.split("=", 1) for item in (args.rdzv_conf or "").split(",") if "=" in item)
    waited = conf.get("join_timeout", "600")
    return (f"metaxlm.launch: error: not every node arrived at the rendezvous {args.rdzv_endpoint or '(default)'} "
            f"(run id {args.rdzv_id!r}, --nnodes {args.nnodes}) within {waited} s: start every node with the same "
            f"--rdzv-endpoint, --rdzv-id and --nnodes; a longer wait: --rdzv-conf=join_timeout=SECONDS")


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.rendezvous.api import RendezvousTimeoutError
    from torch.distributed.run import parse_args, run

    args = parse_args(argv if argv is not None else sys.argv[1:])
    try:
        run(args)
    except RendezvousTimeoutError:
        print(rendezvous_problem(args), file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
