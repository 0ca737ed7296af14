"""The NeMo-Gym half of `./rollout-stream demo --gym` (runs in NeMo-Gym's venv, scripts/gym-env.sh).

Starts the toy policy and NeMo-Gym's own servers in front of it (servers.py),
collects `--batches` batches of rollouts with `rollout_stream.gym.collect`
(one task of each resource server per batch, `--generations` rollouts
each), reads every packed group back with the trainer's `PackedConsumer`,
and checks each generated token against what the policy recorded. The
pipeline's stages are the caller's (the TypeScript demo runs them); the
broker, registry and topic prefix come from KAFKA_BROKERS,
SCHEMA_REGISTRY_URL and TOPIC_PREFIX. The last line on stdout is

    gym demo: <G> groups packed, <T> generated tokens checked against the policy, <M> mismatches

Exit 0 when every group arrived and nothing mismatched.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ground_truth import PolicyRecord, check_group  # noqa: E402


def read_line(proc: subprocess.Popen, prefix: str, timeout: float) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{proc.args[1]} exited (rc {proc.poll()}) before printing {prefix!r}")
        if line.startswith(prefix):
            return line
    raise RuntimeError(f"{proc.args[1]} printed no {prefix!r} line within {timeout} s")


def tasks() -> list[dict]:
    import nemo_gym

    site = Path(nemo_gym.__file__).resolve().parents[1] / "resources_servers"
    out = []
    for server, agent in [("example_single_tool_call", "example_single_tool_call_simple_agent"),
                          ("example_multi_step", "example_multi_step_simple_agent")]:
        task = json.loads((site / server / "data" / "example.jsonl").read_text().splitlines()[0])
        task["agent_ref"] = {"name": agent}
        out.append(task)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=180.0)
    args = ap.parse_args(argv)

    from rollout_stream import PackedConsumer, RolloutPublisher, feed
    from rollout_stream.gym import collect

    prefix = os.environ.get("TOPIC_PREFIX", "")
    work = Path(tempfile.mkdtemp(prefix="gym-demo-"))
    record = work / "policy.jsonl"
    procs = []
    try:
        policy = subprocess.Popen([sys.executable, str(HERE / "toy_policy.py"), "--port", "0", "--seed", str(int(time.time())),
                                   "--record", str(record)], stdout=subprocess.PIPE, text=True)
        procs.append(policy)
        url = read_line(policy, "listening ", 30).split()[1]
        print(f"toy policy at {url}; starting NeMo-Gym's servers (logs in {work}/logs)", file=sys.stderr, flush=True)
        servers = subprocess.Popen([sys.executable, str(HERE / "servers.py"), "--policy-url", f"{url}/v1", "--log-dir", str(work / "logs")],
                                   stdout=subprocess.PIPE, text=True)
        procs.append(servers)
        head = read_line(servers, "ready ", args.timeout).split()[1]
        print(f"NeMo-Gym head server at {head}", file=sys.stderr, flush=True)

        run = uuid.uuid4().hex[:6]
        expected = 0
        with RolloutPublisher() as pub:
            for b in range(args.batches):
                s = collect(tasks(), args.generations, f"gym-{run}-b{b + 1}", publisher=pub, head_server=head, weight_version=b)
                print(s.line(), file=sys.stderr, flush=True)
                expected += 2  # one group per task
        checked, mismatches, groups = 0, [], set()
        truth = PolicyRecord(record)

        def put(sample_ids, fields, tags):
            nonlocal checked
            groups.add(tags[0]["group_id"])
            n, bad = check_group(fields, sample_ids, truth)
            checked += n
            mismatches.extend(bad)

        with PackedConsumer(f"{prefix}rollout.packed", f"gym-demo-{run}", jagged="numpy") as consumer:
            feed(consumer, put, stop_after=expected, idle_timeout=args.timeout)
        for m in mismatches[:10]:
            print(f"mismatch: {m}", file=sys.stderr)
        print(f"gym demo: {len(groups)} groups packed, {checked} generated tokens checked against the policy, {len(mismatches)} mismatches", flush=True)
        return 0 if len(groups) == expected and not mismatches else 1
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    sys.exit(main())
