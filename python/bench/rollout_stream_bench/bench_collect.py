"""``python -m rollout_stream bench collect``: the collector's CPU per rollout, publishing against writing nothing.

Starts the toy policy (``tools/gym/toy_policy.py``, answering at once) and
NeMo-Gym's own servers in front of it (``tools/gym/servers.py`` in NeMo-Gym's
venv, ``--gym-python``; or uses running ones, ``--head-server``), then runs
the same batch of rollouts (the package's two example tasks, repeated to
``--tasks`` task rows, ``--generations`` each) through
:func:`rollout_stream.gym.collect` in this process, in alternating order:

- ``collect``: the results go to a publisher that writes nothing (no
  validation, no encoding, no producer): the collection alone;
- ``collect+publish``: a :class:`~rollout_stream.RolloutPublisher` on a
  scratch topic (``bench-collect.<id>.rollout.row-completed``, deleted
  afterwards, with its registry subject), made before the clock starts and
  closed after it stops; the pass includes the batch end (flush, BatchEnds).

Measured: CPU seconds of this process only (``time.process_time``: every
thread, librdkafka's included; the policy and NeMo-Gym's servers are other
processes) per rollout. ``ratio collect+publish/collect`` is the median over
pairs of publish CPU ÷ collect CPU (1.0 = publishing costs nothing; target
≤ 1.05). One untimed pass of each warms up first. Each pass is a new batch
id; ``resume`` is off (nothing is read back).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / "tools" / "gym"
EXAMPLES = [
    ("example_single_tool_call", "example_single_tool_call_simple_agent", 0),
    ("example_multi_step", "example_multi_step_simple_agent", 1),
]


class NullPublisher:
    """Stands where a ``RolloutPublisher`` stands in :func:`collect` and writes nothing (counts only)."""

    def __init__(self) -> None:
        from rollout_stream.publisher import PublisherStats

        self.stats = PublisherStats()
        self.brokers, self.topic = "", "rollout.row-completed"

    def batch(self, task_rows: Sequence[Any], num_generations: int, batch_id: str, **stamp: Any) -> Any:
        from rollout_stream.batch_stamping import BatchPublisher

        return BatchPublisher(self, task_rows, num_generations, batch_id, **stamp)

    def publish_result(self, gym_row: Any, gym_result: Any, **_identity: Any) -> int:
        self.stats.results += 1
        return 0

    def end_batch(self, batch_id: str, num_rows: int, timeout: float | None = None) -> None:
        return None


def _wait_line(proc: subprocess.Popen, pattern: str, timeout: float, what: str) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {proc.returncode} before it was ready")
            continue
        if re.search(pattern, line):
            return line.strip()
    raise RuntimeError(f"{what} was not ready within {timeout} s")


def gym_python(explicit: str | None) -> str:
    if explicit:
        return explicit
    venv = ROOT / ".local" / "gym-venv" / "bin" / "python"
    if venv.exists():
        return str(venv)
    out = subprocess.run([str(ROOT / "scripts" / "gym-env.sh"), "--print"], capture_output=True, text=True, timeout=1200)
    if out.returncode != 0:
        raise RuntimeError(f"NeMo-Gym's environment did not install: {out.stderr[-2000:]}")
    return out.stdout.strip().splitlines()[-1]


def example_tasks(py: str, count: int) -> list[dict]:
    """``count`` task rows: NeMo-Gym's two example tasks (its package data), alternating."""
    site = subprocess.run([py, "-c", "import nemo_gym, pathlib; print(pathlib.Path(nemo_gym.__file__).parents[1])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    base = []
    for server, agent, line in EXAMPLES:
        task = json.loads(Path(site, "resources_servers", server, "data", "example.jsonl").read_text().splitlines()[line])
        task["agent_ref"] = {"name": agent}
        base.append(task)
    return [json.loads(json.dumps(base[i % len(base)])) for i in range(count)]


class Gym:
    """The toy policy and NeMo-Gym's servers, as subprocesses (stopped by ``close``)."""

    def __init__(self, py: str, log_dir: Path, timeout: float = 240.0) -> None:
        self.procs: list[subprocess.Popen] = []
        try:
            log = open(log_dir / "policy.log", "w")
            policy = subprocess.Popen([sys.executable, str(TOOLS / "toy_policy.py"), "--port", "0", "--seed", "3"],
                                      stdout=subprocess.PIPE, stderr=log, text=True)
            self.procs.append(policy)
            url = _wait_line(policy, r"^listening ", 30, "the toy policy").split()[1]
            servers = subprocess.Popen([py, str(TOOLS / "servers.py"), "--policy-url", f"{url}/v1", "--log-dir", str(log_dir)],
                                       stdout=subprocess.PIPE, stderr=open(log_dir / "servers.log", "w"), text=True)
            self.procs.insert(0, servers)
            self.head = _wait_line(servers, r"^ready ", timeout, "NeMo-Gym's servers").split()[1]
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


def _pass(tasks: list[dict], args: argparse.Namespace, head: str, batch_id: str, publisher: Any) -> tuple[float, float, Any]:
    from rollout_stream.gym import collect

    gc.collect()
    c0, w0 = time.process_time(), time.perf_counter()
    s = collect(tasks, args.generations, batch_id, publisher=publisher, head_server=head, concurrency=args.concurrency,
                backend=args.backend, resume=False)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    if s.failed or s.published != len(tasks) * args.generations:
        raise RuntimeError(f"pass {batch_id}: {s.line()}")
    return cpu, wall, s


def run(args: argparse.Namespace) -> int:
    from rollout_stream.errors import RolloutStreamError

    from .bench_publish_kafka import Capture, Kafka

    if args.repeat < 1 or args.tasks < 1 or args.generations < 1 or args.concurrency < 1:
        raise RolloutStreamError("--repeat, --tasks, --generations and --concurrency must be >= 1")
    kafka = Kafka(args.brokers, args.registry_url, args.timeout)
    kafka.check()
    py = gym_python(args.gym_python)
    tasks = example_tasks(py, args.tasks)
    n = len(tasks) * args.generations
    tmp = tempfile.TemporaryDirectory(prefix="bench-collect-")
    gym = None
    topic = f"bench-collect.{uuid.uuid4().hex[:10]}.rollout.row-completed"
    kafka.create_topic(topic, args.partitions)
    try:
        t0 = time.perf_counter()
        head = args.head_server
        if head is None:
            gym = Gym(py, Path(tmp.name))
            head = gym.head
        run_id = uuid.uuid4().hex[:6]

        def publish(i: int) -> tuple[float, float, Any]:
            pub = kafka.publisher(topic, {})
            try:
                return _pass(tasks, args, head, f"{run_id}-p{i}", pub)
            finally:
                pub.close()

        def collect_only(i: int) -> tuple[float, float, Any]:
            return _pass(tasks, args, head, f"{run_id}-c{i}", NullPublisher())

        def encode_only(i: int) -> tuple[float, float, Any]:
            from rollout_stream.publisher import RolloutPublisher

            pub = RolloutPublisher("bench", topic_prefix="", producer=Capture(args.partitions, keep=False), schema_id=schema_id)
            return _pass(tasks, args, head, f"{run_id}-e{i}", pub)

        first = collect_only(-1)[2]
        pub0 = kafka.publisher(topic, {})
        schema_id = pub0.schema_id
        pub0.close()
        warm = publish(-1)[2]
        if args.encode:
            encode_only(-1)
        print(
            f"bench collect: head {head} ({'given' if gym is None else f'started in {time.perf_counter() - t0:.0f} s'}), "
            f"backend {first.backend}, {len(tasks)} tasks x {args.generations} = {n} rollouts per pass, concurrency "
            f"{args.concurrency}, {args.repeat} alternating pairs; {warm.bytes / warm.published / 1e3:.1f} kB/rollout "
            f"published to {topic} (deleted)"
        )
        ratios, cpu_c, cpu_p, cpu_e = [], [], [], []
        for i in range(args.repeat):
            modes = [collect_only, publish] + ([encode_only] if args.encode else [])
            order = modes if i % 2 == 0 else modes[::-1]
            got = {}
            for f in order:
                got[f] = f(i)
            (cc, cw, _), (pc, pw, _) = got[collect_only], got[publish]
            ratios.append(pc / cc)
            cpu_c.append(cc)
            cpu_p.append(pc)
            enc = ""
            if args.encode:
                ec = got[encode_only][0]
                cpu_e.append(ec)
                enc = f", collect+encode {ec / n * 1e3:.3f} ms"
            print(
                f"pair {i + 1}: collect {cc / n * 1e3:.3f} ms CPU/rollout ({n / cw:.1f} rollouts/s), "
                f"collect+publish {pc / n * 1e3:.3f} ms CPU/rollout ({n / pw:.1f} rollouts/s){enc}, ratio {pc / cc:.3f}",
                flush=True,
            )
        print(
            f"median CPU per rollout: collect {statistics.median(cpu_c) / n * 1e3:.3f} ms, "
            f"collect+publish {statistics.median(cpu_p) / n * 1e3:.3f} ms"
            + (f", collect+encode (no Kafka) {statistics.median(cpu_e) / n * 1e3:.3f} ms" if cpu_e else "")
        )
        print(f"ratio collect+publish/collect: {statistics.median(ratios):.3f}  (median of {len(ratios)} pairs, "
              f"{min(ratios):.3f}-{max(ratios):.3f}; target <= 1.05)")
        return 0
    finally:
        if gym is not None:
            gym.close()
        kafka.delete_topic(topic)
        kafka.delete_subject(f"{topic}-value")
        tmp.cleanup()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", type=int, default=64, help="task rows per pass (NeMo-Gym's two example tasks, alternating; default 64)")
    p.add_argument("--generations", type=int, default=4, help="rollouts per task (default 4)")
    p.add_argument("--concurrency", type=int, default=16, help="rollouts in flight (default 16, as collect)")
    p.add_argument("--repeat", type=int, default=5, help="alternating pairs (default 5)")
    p.add_argument("--backend", default="auto", choices=["auto", "nemo_gym", "http"],
                   help="collect's backend (auto: NeMo-Gym's client where this Python has it, else http)")
    p.add_argument("--head-server", default=None, metavar="URL", help="use running NeMo-Gym servers instead of starting them")
    p.add_argument("--gym-python", default=None, metavar="PY",
                   help="NeMo-Gym's venv python for its servers and example tasks (default .local/gym-venv, made by scripts/gym-env.sh)")
    p.add_argument("--encode", action="store_true",
                   help="a third pass per round: the publisher encoding into memory, no Kafka (where the cost is)")
    p.add_argument("--partitions", type=int, default=4, help="partitions of the scratch topic (default 4)")
    p.add_argument("--brokers", default=os.environ.get("KAFKA_BROKERS") or "127.0.0.1:9092")
    p.add_argument("--registry-url", default=os.environ.get("SCHEMA_REGISTRY_URL") or "http://127.0.0.1:8081/apis/ccompat/v7")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the broker and registry (default 10)")
