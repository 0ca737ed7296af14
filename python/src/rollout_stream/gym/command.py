"""``python -m rollout_stream collect``: one step of NeMo-Gym rollouts into ``rollout.row-completed``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import textwrap
from pathlib import Path

DESCRIPTION = textwrap.fill(
    "Runs one batch of NeMo-Gym rollouts and publishes each result to rollout.row-completed the moment it "
    "completes: every task row of --tasks is run --generations times (one group per task), through the agent "
    "server its agent_ref names (or --agent), via NeMo-Gym's head server. A rollout that fails "
    "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS times (default 3) is reported and not published, so its group becomes an "
    "incomplete_group dead letter. Run it again with the same --batch-id after a crash: rows already on the "
    "topic are not run again. Progress goes to stderr every 2 s; the summary line to stderr and, with "
    "--summary-json, as JSON to stdout. Exit 0 when every rollout was published, 1 when some failed, 2 on errors.",
    90,
)

EPILOG = """examples:
  python -m rollout_stream collect --tasks step-41.jsonl --generations 8 --batch-id step-41 --weight-version 41
  python -m rollout_stream collect --tasks tasks.jsonl --generations 4 --batch-id b7 \\
      --head-server http://127.0.0.1:11000 --agent example_multi_step_simple_agent --concurrency 32
  python -m rollout_stream collect --tasks step-42.jsonl --generations 8 --batch-id step-42 \\
      --max-buffered-groups 64 --trainer-group grpo-trainer

environment: KAFKA_BROKERS, SCHEMA_REGISTRY_URL, TOPIC_PREFIX (and the SASL/TLS variables of the publisher),
NEMO_GYM_MAX_ROLLOUT_ATTEMPTS."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "collect",
        help="run one batch of NeMo-Gym rollouts and publish each result as it completes",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("--tasks", required=True, metavar="FILE", help="NeMo-Gym task rows, one JSON object a line ('-': stdin)")
    c.add_argument("--generations", type=int, required=True, metavar="N", help="rollouts per task (the group size)")
    c.add_argument("--batch-id", required=True, metavar="B", help="the batch (training step); groups are B/g<task>")
    c.add_argument("--weight-version", type=int, default=0, metavar="V", help="policy weight version (default 0)")
    c.add_argument("--head-server", default=os.environ.get("NEMO_GYM_HEAD_SERVER", "http://127.0.0.1:11000"),
                   metavar="URL", help="NeMo-Gym head server (default $NEMO_GYM_HEAD_SERVER or http://127.0.0.1:11000)")
    c.add_argument("--agent", default=None, help="agent server for task rows without agent_ref")
    c.add_argument("--concurrency", type=int, default=16, help="rollouts in flight at once (default 16)")
    c.add_argument("--backend", default="auto", choices=["auto", "nemo_gym", "http"],
                   help="NeMo-Gym's own client (nemo_gym, needs the package), plain HTTP, or auto (default)")
    c.add_argument("--add-seed", action="store_true",
                   help="send each rollout's index as seed in metadata.extra_body (NeMo-Gym's num_repeats_add_seed)")
    c.add_argument("--max-buffered-groups", type=int, default=None, metavar="M",
                   help="backpressure: start no rollout while M groups wait for the trainer (unconsumed by "
                        "--trainer-group on rollout.packed, or this run's complete groups still in the pipeline)")
    c.add_argument("--trainer-group", default=None, metavar="G",
                   help="the trainer's consumer group on rollout.packed (with --max-buffered-groups)")
    c.add_argument("--resume-since", default=None, metavar="T",
                   help="read the batch's published rows back from time T (ms since epoch or ISO-8601) instead of the "
                   "partitions' beginning: faster on a long topic, and right when the batch started after T")
    c.add_argument("--no-resume", action="store_true", help="do not read back rows of the batch already on the topic")
    c.add_argument("--limit", type=int, default=None, metavar="K", help="only the first K task rows")
    c.add_argument("--summary-json", action="store_true", help="print the summary as JSON on stdout")
    c.add_argument("--quiet", action="store_true", help="no progress lines (the summary stays)")


def run(args: argparse.Namespace) -> int:
    from ..publisher import RolloutPublisher
    from ..replay_reader import to_millis
    from .collector import ProgressLine, collect, read_tasks

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if args.tasks == "-":
        tasks = read_tasks(sys.stdin, "stdin")
    else:
        with open(args.tasks, encoding="utf-8") as f:
            tasks = read_tasks(f, Path(args.tasks).name)
    if args.limit is not None:
        tasks = tasks[: args.limit]
    progress = None if args.quiet else ProgressLine()
    with RolloutPublisher() as pub:
        summary = collect(
            tasks, args.generations, args.batch_id,
            publisher=pub, head_server=args.head_server, weight_version=args.weight_version, agent=args.agent,
            concurrency=args.concurrency, backend=args.backend, resume=not args.no_resume, resume_since_ms=to_millis(args.resume_since) if args.resume_since else None, progress=progress,
            add_seed=args.add_seed, max_buffered_groups=args.max_buffered_groups, trainer_group=args.trainer_group,
        )
    print(summary.line(), file=sys.stderr, flush=True)
    for f in summary.failures:
        print(f"failed: row {f.row_index} (group {f.group_id}, task {f.task_index}, agent {f.agent}) after "
              f"{f.attempts} attempt(s): {f.error}", file=sys.stderr)
    if args.summary_json:
        print(json.dumps(summary.to_json()), flush=True)
    return 1 if summary.failed else 0
