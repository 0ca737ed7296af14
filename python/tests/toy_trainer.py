"""A toy trainer process for the resume-invariant test (test_resume_kafka.py).

It "trains" by appending each group id it gets to its state, and every ``k``
groups (and when the topic goes quiet, and when partitions are revoked)
writes a checkpoint atomically: ``{"state": [...], "rollout_stream":
{"format": 1, "position": ...}}`` to ``<dir>/rank-<r>.json`` (temp file,
fsync, rename, fsync of the folder), then — with ``--mode on_checkpoint`` —
commits that position. On start it restores its state from its own
checkpoint and resumes at the merge of every rank's checkpointed position
(a callable ``start_offsets``, asked at each assignment). With ``--mode
after_put`` it relies on the group's committed offsets instead (the
default consumer behaviour), which loses what was committed but not
checkpointed when it dies.

``CRASH=<point>[:n]`` makes it SIGKILL itself at a named moment (after
writing ``<dir>/crash-<rank>-<point>-<pid>.json`` with the groups trained
since its last checkpoint):
``before_checkpoint:n`` (the n-th checkpoint, before writing it),
``after_checkpoint:n`` (the n-th checkpoint is durable, not yet committed),
``in_revoke`` (inside the first rebalance revoke, before checkpointing).
It exits after a final checkpoint once ``<dir>/stop`` exists.

It joins as the static member ``--instance-id`` (default ``toy-rank-<r>``;
``""``: dynamic membership) and appends one line per assignment to
``<dir>/assigned-<rank>.jsonl`` (pid, wall-clock time, partitions; written
from the ``start_offsets`` callable, so ``--mode on_checkpoint`` only),
after a ``started`` line with the process's start time.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import sys
import time

STARTED = time.time()  # before the imports below, which take most of a start-up

from rollout_stream import PackedConsumer, feed, get_position, merge_positions, put_position


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--registry", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--mode", choices=["on_checkpoint", "after_put"], default="on_checkpoint")
    ap.add_argument("--put-sleep", type=float, default=0.005)
    ap.add_argument("--instance-id", default=None, help='group.instance.id (default toy-rank-<rank>; "": dynamic membership)')
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--max-poll-interval-ms", type=int, default=10000)
    a = ap.parse_args()
    instance_id = f"toy-rank-{a.rank}" if a.instance_id is None else a.instance_id
    events = os.path.join(a.dir, f"assigned-{a.rank}.jsonl")

    def event(**what) -> None:
        with open(events, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), **what}) + "\n")

    event(started=STARTED)

    path = os.path.join(a.dir, f"rank-{a.rank}.json")
    point, _, nth = os.environ.get("CRASH", "").partition(":")
    nth_i = int(nth or 1)
    counts = {"checkpoint": 0}

    def read(p: str) -> dict:
        try:
            with open(p) as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

    ckpt = read(path)
    state: list[str] = list(ckpt.get("state", []))
    since: list[str] = []

    def crash(name: str) -> None:
        with open(os.path.join(a.dir, f"crash-{a.rank}-{name}-{os.getpid()}.json"), "w") as f:
            json.dump({"since_checkpoint": since}, f)
            f.flush()
            os.fsync(f.fileno())
        os.kill(os.getpid(), signal.SIGKILL)

    def start_offsets(assigned):
        event(assigned=time.time(), partitions=sorted(p for _, p in assigned))
        return merge_positions(get_position(read(p)) for p in sorted(glob.glob(os.path.join(a.dir, "rank-*.json"))))

    def checkpoint(consumer: PackedConsumer) -> None:
        counts["checkpoint"] += 1
        if point == "before_checkpoint" and counts["checkpoint"] == nth_i and since:
            crash(point)
        pos = consumer.position()
        data = put_position({"state": state}, pos)
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dfd = os.open(a.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        if point == "after_checkpoint" and counts["checkpoint"] == nth_i:
            crash(point)
        since.clear()
        if a.mode == "on_checkpoint":
            consumer.commit(get_position(data))

    def on_revoke(consumer: PackedConsumer, partitions) -> None:
        if point == "in_revoke":
            crash(point)
        checkpoint(consumer)

    def put(sample_ids, fields, tags) -> None:
        gid = tags[0]["group_id"]
        time.sleep(a.put_sleep)
        state.append(gid)
        since.append(gid)

    consumer = PackedConsumer(
        a.topic,
        a.group,
        a.brokers,
        a.registry,
        jagged="numpy",
        commit=a.mode,
        start_offsets=start_offsets if a.mode == "on_checkpoint" else None,
        on_revoke=on_revoke if a.mode == "on_checkpoint" else None,
        instance_id=instance_id or False,  # static: a restarted rank takes its place at once
        config={
            "session.timeout.ms": a.session_timeout_ms,
            "heartbeat.interval.ms": 500,
            "max.poll.interval.ms": a.max_poll_interval_ms,
        },
    )
    stop = os.path.join(a.dir, "stop")
    while not os.path.exists(stop):
        feed(consumer, put, stop_after=a.k - len(since), poll_timeout=0.1, idle_timeout=0.3)
        if since:
            checkpoint(consumer)
    checkpoint(consumer)
    consumer.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
