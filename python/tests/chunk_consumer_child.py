"""A trainer for test_consumer_chunks.py: feeds a packed topic into a put_samples that logs,
per call, the group id and a hash of every field (one JSON line, flushed), so the parent can
tell each group was handed over once and whole. ``RS_CRASH_AT=consumer.mid-set:k`` (set by
the parent) makes the consumer SIGKILL itself after chunk k of the second chunk set it reads."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

import numpy as np


def field_hash(fields: dict) -> str:
    """sha256 over the fields' names, offsets and values (jagged and dense alike)."""
    h = hashlib.sha256()
    for name in sorted(fields):
        v = fields[name]
        parts = [v.offsets, v.values] if hasattr(v, "offsets") else [v]
        h.update(name.encode())
        for a in parts:
            h.update(np.ascontiguousarray(np.asarray(a)).tobytes())
    return h.hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--idle", type=float, default=8.0)
    a = ap.parse_args()
    from rollout_stream import PackedConsumer, feed

    out = open(a.log, "a")

    def put_samples(sample_ids, fields, tags):
        out.write(json.dumps({"group": tags[0]["group_id"], "rows": len(sample_ids), "hash": field_hash(fields)}) + "\n")
        out.flush()

    # A short session: the SIGKILLed predecessor's membership expires in seconds, not 45.
    config = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}
    with PackedConsumer(a.topic, a.group, jagged="numpy", verify_chunk_crc=True, instance_id=False, config=config) as c:
        stats = feed(c, put_samples, idle_timeout=a.idle, poll_timeout=0.5)
    print(json.dumps({"groups": stats.groups, "done": {f"{t}[{p}]": o for (t, p), o in stats.done.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
