"""SPEC §6.1 with real processes and the real broker: SIGKILLed trainers resume from checkpoints.

A publisher thread writes packed groups to a 4-partition topic while toy
trainer processes (``toy_trainer.py``) consume it. They are SIGKILLed at
random moments and at named ones — between ``put_samples`` and the
checkpoint, between a durable checkpoint and its commit, inside the revoke
of a rebalance that a second rank's arrival started — and restarted from
their last checkpoint. At the end the checkpointed states of both ranks
hold every packed group exactly once. The same run shape with
``commit="after_put"`` loses exactly the groups committed after the last
checkpoint, which is why ``on_checkpoint`` exists.
"""

from __future__ import annotations

import glob
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from builders import versioned_group
from kafka_helpers import committed_offsets, end_offsets, headers_for, packed_value, produce

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent
PARTITIONS = 4


class Rank:
    """One toy trainer rank: (re)started as a subprocess, SIGKILLed by pid."""

    def __init__(self, harness: "Harness", rank: int) -> None:
        self.h, self.rank = harness, rank
        self.proc: subprocess.Popen | None = None
        self.log = open(harness.dir / f"rank-{rank}.log", "ab")
        self.args: list[str] = []  # more toy_trainer.py flags

    def start(self, crash: str = "") -> None:
        assert self.proc is None or self.proc.poll() is not None
        env = {**os.environ, "CRASH": crash, "PYTHONPATH": str(HERE)}
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "toy_trainer.py"), "--topic", self.h.topic, "--group", self.h.group_id,
             "--brokers", self.h.brokers, "--registry", self.h.registry, "--dir", str(self.h.dir),
             "--rank", str(self.rank), "--k", "5", "--mode", self.h.mode, *self.args],
            stdout=self.log, stderr=self.log, env=env, start_new_session=True,
        )

    def kill(self) -> bool:
        """SIGKILL; True when it was still running (a real kill, not an already dead one)."""
        p = self.proc
        if p is None or p.poll() is not None:
            return False
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        self.h.kills += 1
        return True

    def wait_dead(self, timeout: float) -> bool:
        """Waits for a self-SIGKILL (an armed crash point); counts it."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        if rc == -signal.SIGKILL:
            self.h.kills += 1
        return rc == -signal.SIGKILL

    def state(self) -> list[str]:
        try:
            return json.loads((self.h.dir / f"rank-{self.rank}.json").read_text())["state"]
        except FileNotFoundError:
            return []


class Harness:
    def __init__(self, kafka_env, topic: str, tmp: Path, mode: str) -> None:
        self.brokers, self.registry, self.topic, self.mode = kafka_env.brokers, kafka_env.registry_url, topic, mode
        self.group_id = f"pytest-resume-{uuid.uuid4().hex[:8]}"
        self.dir = tmp
        self.kills = 0

    def checkpointed(self, ranks: list[Rank]) -> Counter:
        return Counter(g for r in ranks for g in r.state())

    def crashes(self, point: str) -> list[dict]:
        return [json.loads(Path(p).read_text()) for p in sorted(glob.glob(str(self.dir / f"crash-*-{point}-*.json")))]

    def stop(self, ranks: list[Rank], timeout: float = 30) -> None:
        (self.dir / "stop").write_text("")
        for r in ranks:
            if r.proc is not None:
                try:
                    r.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    r.kill()
                    pytest.fail(f"rank {r.rank} did not stop; log:\n{(self.dir / f'rank-{r.rank}.log').read_text()[-3000:]}")


class Publisher(threading.Thread):
    """Publishes batches of 10 groups every ``gap`` seconds until stopped; ``names`` are the ones published."""

    def __init__(self, kafka_env, topic: str, schema_id: int, packed_schema: dict, gap: float) -> None:
        super().__init__(daemon=True)
        self.args = (kafka_env.brokers, topic, schema_id, packed_schema)
        self.gap = gap
        self.names: list[str] = []
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        brokers, topic, schema_id, schema = self.args
        step = 0
        try:
            while not self.halt.is_set():
                chunk = [versioned_group(f"grp-{step:03d}-{i}", 1, batch_id=f"step-{step}") for i in range(10)]
                produce(brokers, topic, [(r["group_id"], packed_value(schema_id, schema, r), headers_for(r), None) for r in chunk])
                self.names += [r["group_id"] for r in chunk]
                step += 1
                self.halt.wait(self.gap)
        except BaseException as e:  # surfaced by the test
            self.error = e

    def stop(self) -> list[str]:
        self.halt.set()
        self.join(60)
        assert not self.is_alive() and self.error is None, self.error
        return self.names


def wait_until(cond, timeout: float, what: str, ranks: list[Rank], h: Harness) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    logs = "\n".join(f"--- rank {r.rank}\n" + (h.dir / f"rank-{r.rank}.log").read_text()[-2000:] for r in ranks)
    pytest.fail(f"timed out waiting for {what}\n{logs}")


@pytest.fixture
def ranks_to_reap():
    """Ranks still running when a test ends (failed) are SIGKILLed, so none outlives its topic."""
    made: list[Rank] = []
    yield made
    for r in made:
        if r.proc is not None and r.proc.poll() is None:
            os.kill(r.proc.pid, signal.SIGKILL)
            r.proc.wait(10)


def test_sigkilled_trainers_resumed_from_checkpoints_hold_every_group_exactly_once(
    kafka_env, packed_topics, packed_schema, tmp_path, ranks_to_reap
):
    seed = int(os.environ.get("RESUME_SEED", random.randrange(1 << 30)))
    rnd = random.Random(seed)
    topic, schema_id = packed_topics(partitions=PARTITIONS)
    h = Harness(kafka_env, topic, tmp_path, "on_checkpoint")
    a, b = Rank(h, 0), Rank(h, 1)
    ranks = [a, b]
    ranks_to_reap.extend(ranks)
    pub = Publisher(kafka_env, topic, schema_id, packed_schema, gap=0.3)  # ~30 groups/s while the kills go on
    pub.start()

    def progress() -> int:
        return sum(h.checkpointed(ranks).values())

    # 1. rank 0 alone, SIGKILLed at random moments (startup, joining, feeding, checkpointing)
    a.start()
    for _ in range(5):
        time.sleep(rnd.uniform(0.6, 1.6))
        a.kill()
        a.start()
    # 2. named moments: between put_samples and the checkpoint; durable checkpoint not yet committed
    for crash in ("before_checkpoint:2", "after_checkpoint:2"):
        a.kill()
        a.start(crash)
        assert a.wait_dead(30), f"rank 0 did not reach {crash}"
        a.start()
    # 3. a rebalance: rank 1 joins while rank 0 is armed to die inside its revoke
    a.kill()
    a.start("in_revoke")
    before = progress()
    wait_until(lambda: progress() > before, 30, "rank 0 to consume before the rebalance", ranks, h)
    b.start()
    assert a.wait_dead(30), "rank 0 did not die inside the revoke"
    a.start()
    time.sleep(rnd.uniform(0.3, 1.0))  # rank 1 is joining / just joined
    b.kill()
    b.start()
    # 4. random kills of either rank
    for _ in range(3):
        time.sleep(rnd.uniform(0.5, 1.5))
        r = rnd.choice(ranks)
        r.kill()
        r.start()
    # 5. rank 1 down past its session timeout: its partitions move to rank 0, then it comes back
    time.sleep(rnd.uniform(0.3, 1.0))
    b.kill()
    time.sleep(8)
    b.start()
    wait_until(lambda: b.state() and len(a.state()) > 0, 30, "both ranks to checkpoint after the last restart", ranks, h)
    names = pub.stop()
    wait_until(lambda: len(h.checkpointed(ranks)) >= len(names), 60, "every group to be checkpointed", ranks, h)
    h.stop(ranks)

    got = h.checkpointed(ranks)
    assert h.kills >= 10, h.kills
    assert len(h.crashes("before_checkpoint")) == 1 and h.crashes("before_checkpoint")[0]["since_checkpoint"]
    assert len(h.crashes("after_checkpoint")) == 1 and len(h.crashes("in_revoke")) == 1
    dupes = {g: n for g, n in got.items() if n > 1}
    assert not dupes, f"seed {seed}: groups trained twice: {dupes}"
    assert set(got) == set(names), f"seed {seed}: missing {sorted(set(names) - set(got))[:20]}"
    assert a.state() and b.state()  # both ranks trained
    assert committed_offsets(h.brokers, h.group_id, topic, PARTITIONS) == end_offsets(h.brokers, topic, PARTITIONS)


def test_with_after_put_a_crash_before_the_checkpoint_loses_the_committed_groups(
    kafka_env, packed_topics, packed_schema, tmp_path, ranks_to_reap
):
    topic, schema_id = packed_topics(partitions=2)
    names = [f"grp-{i:03d}" for i in range(40)]
    recs = [versioned_group(n, 1) for n in names]
    produce(kafka_env.brokers, topic, [(r["group_id"], packed_value(schema_id, packed_schema, r), headers_for(r), None) for r in recs])
    h = Harness(kafka_env, topic, tmp_path, "after_put")
    a = Rank(h, 0)
    ranks_to_reap.append(a)
    a.start("before_checkpoint:3")
    assert a.wait_dead(30), "rank 0 did not reach before_checkpoint:3"
    a.start()
    wait_until(lambda: committed_offsets(h.brokers, h.group_id, topic, 2) == end_offsets(h.brokers, topic, 2), 60,
               "the group to commit everything", [a], h)
    time.sleep(1.0)  # its idle checkpoint
    h.stop([a])
    got = Counter(a.state())
    (crash,) = h.crashes("before_checkpoint")
    lost = sorted(set(names) - set(got))
    # the groups trained after the 2nd checkpoint were committed, died with the process, and never came back
    assert lost == sorted(crash["since_checkpoint"]) and lost
    assert all(n == 1 for n in got.values())
