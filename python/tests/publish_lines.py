"""Publishes GymResult JSON lines (the form of SPEC §9) with ``RolloutPublisher``.

A stand-in for a NeMo-Gym rollout worker in the integration tests: one
``publish_result`` per GymResult line, stamped with the current time as
``produced_at`` (a re-run after a crash stamps new times), each record
acknowledged before the next (``--ack-each``, so a test can SIGKILL it
mid-batch at a known point), and ``end_batch`` for every ``batch_end`` line.
Prints ``acked <n>`` after each acknowledged record.

    python publish_lines.py LINES.jsonl [--ack-each] [--delay S]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from rollout_stream import RolloutPublisher

IDENTITY = ("batch_id", "group_id", "group_index", "row_index", "num_generations", "prompt_idx", "weight_version")
OPTIONAL = ("task_index", "instance_label", "timing")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("lines")
    ap.add_argument("--ack-each", action="store_true")
    ap.add_argument("--delay", type=float, default=0.0)
    args = ap.parse_args()
    with open(args.lines, encoding="utf-8") as f, RolloutPublisher() as pub:
        acked = 0
        for text in f:
            if not text.strip():
                continue
            line = json.loads(text)
            if "batch_end" in line:
                end = line["batch_end"]
                pub.end_batch(end["batch_id"], end["num_rows"])
                continue
            ident = {k: line[k] for k in IDENTITY}
            ident.update({k: line[k] for k in OPTIONAL if line.get(k) is not None})
            pub.publish_result(line["gym_row"], line["gym_result"], produced_at=int(time.time() * 1000), **ident)
            if args.ack_each:
                pub.flush()
                acked += 1
                print(f"acked {acked}", flush=True)
            if args.delay:
                time.sleep(args.delay)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
