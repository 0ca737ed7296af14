"""``bench publish``: argument parsing, inputs, the A/B procedure and its output, against fakes (no broker)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from typing import Any

import pytest

from fake_producer import FakeProducer
from rollout_stream import cli
from rollout_stream_bench import bench, bench_publish, bench_publish_inputs
from rollout_stream.errors import BrokerUnavailableError
from rollout_stream.publisher import RolloutPublisher, producer_settings


def gym_result_line(i: int, *, nan: bool = False) -> dict[str, Any]:
    """One GymResult JSON-form line shaped like the load generator's (two turns, envelope routes)."""
    lp = [-0.5 - k / 1000 for k in range(40)]
    return {
        "batch_id": "b1", "group_id": f"b1/g{i // 2}", "group_index": i // 2, "row_index": i, "num_generations": 2,
        "prompt_idx": 7, "task_index": 3, "weight_version": 1, "instance_label": "actor-0",
        "gym_row": {"responses_create_params": {"input": [{"role": "user", "content": "q"}], "temperature": 1.0},
                    "agent_ref": {"name": "math"}, "_ng_task_index": 3},
        "gym_result": {
            "reward": 0.5,
            "response": {"output": [
                {"type": "message", "prompt_token_ids": list(range(30)), "generation_token_ids": list(range(100, 140)),
                 "generation_log_probs": ["NaN"] + lp[1:] if nan else lp,
                 "routed_experts": "nrlre1:int8:70x1x2:" + "AA" * 93 + "A=="},
            ]},
        },
        "timing": {"generation_s": 1.5},
        "produced_at": 1700000000000 + i,
    }


@pytest.fixture
def input_file(tmp_path):
    path = tmp_path / "results.jsonl"
    lines = [gym_result_line(i, nan=i == 1) for i in range(4)] + [{"batch_end": {"batch_id": "b1", "num_rows": 4}}]
    path.write_text("".join(json.dumps(o) + "\n" for o in lines), encoding="utf-8")
    return path


class FakeRaw:
    """confluent-kafka Producer's produce/poll/flush, recording what the raw passes send."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.produced: list[tuple[str, bytes, bytes, int]] = []
        self.flushes = 0

    def produce(self, topic: str, value: bytes, key: bytes, partition: int) -> None:
        self.produced.append((topic, key, value, partition))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = -1) -> int:
        self.flushes += 1
        return 0


class FakeKafka(bench_publish.Kafka):
    def __init__(self) -> None:
        super().__init__("fake:9092", "http://registry.invalid")
        self.created: list[tuple[str, int]] = []
        self.deleted: list[str] = []
        self.subjects: list[str] = []
        self.raws: list[FakeRaw] = []
        self.producers: list[FakeProducer] = []
        self.publisher_config: dict[str, Any] | None = None

    def check(self) -> None:
        pass

    def create_topic(self, topic: str, partitions: int) -> None:
        self.created.append((topic, partitions))

    def delete_topic(self, topic: str) -> None:
        self.deleted.append(topic)

    def delete_subject(self, subject: str) -> None:
        self.subjects.append(subject)

    def raw_producer(self, conf: dict[str, Any]) -> FakeRaw:
        self.raws.append(FakeRaw(conf))
        return self.raws[-1]

    def publisher(self, topic: str, producer_config: dict[str, Any]) -> RolloutPublisher:
        self.publisher_config = producer_config
        self.producers.append(FakeProducer(partitions=self.created[-1][1]))
        return RolloutPublisher(topic, topic_prefix="", producer=self.producers[-1], schema_id=42)


def parse(argv: list[str]) -> Any:
    captured = {}
    orig = bench_publish.run
    bench_publish.run = lambda args: captured.setdefault("args", args) and 0  # type: ignore[assignment]
    try:
        cli.main(argv)
    finally:
        bench_publish.run = orig
    return captured["args"]


def test_the_publish_subcommand_parses_its_own_options_and_leaves_the_decode_bench_alone(monkeypatch):
    args = parse(["bench", "publish", "--profile", "router-replay", "--rows", "3", "--repeat", "2",
                  "--brokers", "h:1", "--registry-url", "http://r/x", "-X", "linger.ms=20", "-X", "batch.size=1000"])
    assert (args.bench_command, args.profile, args.rows, args.repeat) == ("publish", "router-replay", 3, 2)
    assert (args.brokers, args.registry_url, args.X) == ("h:1", "http://r/x", ["linger.ms=20", "batch.size=1000"])
    defaults = parse(["bench", "publish"])
    assert (defaults.profile, defaults.rows, defaults.repeat, defaults.partitions, defaults.input) == ("both", None, 7, 4, None)
    seen = {}
    monkeypatch.setattr(bench, "run", lambda a: seen.setdefault("decode", (a.bench_command, a.rows)) and 0)
    cli.main(["bench", "--rows", "5"])
    assert seen["decode"] == (None, 5)


def test_a_run_times_alternating_pairs_of_the_same_bytes_and_prints_the_ratio_line(input_file, capsys):
    kafka = FakeKafka()
    args = parse(["bench", "publish", "--input", str(input_file), "--repeat", "3", "--partitions", "3", "-X", "linger.ms=7"])
    assert bench_publish.run(args, kafka=kafka) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("bench publish: brokers fake:9092, registry http://registry.invalid, 3 partitions, 3 alternating pairs")
    assert re.fullmatch(r"profile results\.jsonl: 4 GymResults, \d+\.\d\d MB framed \(.* kB/row, .* kB\) from .*results\.jsonl "
                        r"\(4 GymResults\); topic bench-publish\.[0-9a-f]{10}\.rollout\.row-completed \(deleted\)", lines[1])
    for label, what in (("raw", "confluent-kafka produce of the same bytes"), ("publish", "RolloutPublisher.publish_result"),
                        ("encode", "encode only")):
        assert any(re.fullmatch(rf"  {label} +{re.escape(what)}.* +\d+\.\d rows/s +\d+\.\d MB/s", l) for l in lines), label
    assert re.fullmatch(r"ratio publish/raw: \d+\.\d{3}  \(median of 3 pairs, \d+\.\d{3}-\d+\.\d{3}\)", lines[-1])

    # the raw producer sent exactly the publisher's records (1 warm-up + 3 timed passes each)
    (raw,) = kafka.raws
    (fake,) = kafka.producers
    topic = kafka.created[0][0]
    assert kafka.created == [(topic, 3)] and kafka.deleted == [topic] and kafka.subjects == [f"{topic}-value"]
    published = [(p.topic, p.key, p.value, p.partition) for p in fake.produced]
    assert len(published) == len(raw.produced) == 4 * 4
    assert raw.produced == published and all(v[1:5] == (42).to_bytes(4, "big") for _, _, v, _ in published)
    assert {p for *_, p in published} <= {0, 1, 2}
    # same settings as the publisher's producer, extras applied to both, reports only for errors
    assert kafka.publisher_config == {"linger.ms": "7"}
    assert {k: v for k, v in raw.conf.items() if k not in ("delivery.report.only.error", "on_delivery")} == producer_settings(
        "fake:9092", {"linger.ms": "7"})
    assert raw.conf["delivery.report.only.error"] is True and raw.conf["acks"] == "all" and raw.conf["enable.idempotence"] is True


def test_results_from_lines_reads_gym_results_with_float_logprobs_and_skips_batch_ends(input_file):
    results = bench_publish.results_from_lines(input_file.read_text().splitlines(), "f")
    assert len(results) == 4 and results[0]["gym_row"]["agent_ref"] == {"name": "math"}
    lp = results[1]["gym_result"]["response"]["output"][0]["generation_log_probs"]
    assert math.isnan(lp[0]) and lp[1] == -0.501
    with pytest.raises(ValueError, match="f line 2 is not JSON"):
        bench_publish.results_from_lines(['{"batch_end": {}}', "{oops"], "f")
    with pytest.raises(ValueError, match="f line 1 is a row, not a GymResult"):
        bench_publish.results_from_lines(['{"message_log": []}'], "f")
    with pytest.raises(ValueError, match="holds no GymResult"):
        bench_publish.results_from_lines(['{"batch_end": {"batch_id": "b", "num_rows": 0}}'], "f")


def test_rows_cycles_through_the_input_and_the_loadgen_command_is_the_dry_run_one(monkeypatch, tmp_path, input_file):
    args = parse(["bench", "publish", "--input", str(input_file), "--rows", "6"])
    (w,) = bench_publish.build_workloads(args)
    assert [r["row_index"] for r in w.results] == [0, 1, 2, 3, 0, 1]

    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout=input_file.read_text(), stderr="")

    monkeypatch.setattr(bench_publish_inputs.subprocess, "run", fake_run)
    args = parse(["bench", "publish", "--rows", "5", "--seed", "9"])
    ws = bench_publish.build_workloads(args, root=tmp_path)
    assert [w.name for w in ws] == ["published-max", "router-replay"] and all(len(w.results) == 5 for w in ws)
    assert calls[0] == [str(tmp_path / "rollout-stream"), "loadgen", "--format", "gym-result", "--dry-run", "--quiet",
                        "--profile", "published-max", "--batches", "1", "--groups", "2", "--generations", "4", "--seed", "9"]
    assert calls[1][calls[1].index("--profile") + 1] == "router-replay"


def test_a_failing_load_generator_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(bench_publish_inputs.subprocess, "run",
                        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, stdout="", stderr="boom: no node"))
    args = parse(["bench", "publish", "--profile", "published-max"])
    with pytest.raises(bench_publish.RolloutStreamError, match="load generator failed .* exit 1: boom: no node"):
        bench_publish.build_workloads(args, root=tmp_path)


def test_no_broker_is_a_clear_error_before_anything_is_generated():
    with pytest.raises(BrokerUnavailableError, match=r"no Kafka broker answered at 127\.0\.0\.1:1 .*--brokers"):
        bench_publish.Kafka("127.0.0.1:1", "http://127.0.0.1:1", timeout=1).check()
    out = subprocess.run([sys.executable, "-m", "rollout_stream", "bench", "publish", "--brokers", "127.0.0.1:1",
                          "--timeout", "1", "--input", "/nonexistent"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.startswith("error [broker_unavailable]: no Kafka broker answered at 127.0.0.1:1")


def _bench_topics(brokers: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return {t for t in AdminClient({"bootstrap.servers": brokers}).list_topics(timeout=10).topics if t.startswith("bench-publish.")}


def _run_bench(kafka_env, *extra: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "rollout_stream", "bench", "publish", "--repeat", "1", "--partitions", "2",
         "--brokers", kafka_env.brokers, "--registry-url", kafka_env.registry_url, *extra],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()


@pytest.mark.integration
def test_a_tiny_run_on_the_real_broker_prints_the_ratio_and_leaves_no_topic_behind(kafka_env, input_file):
    lines = _run_bench(kafka_env, "--input", str(input_file))
    topic = re.search(r"topic (bench-publish\.[0-9a-f]{10}\.rollout\.row-completed)", lines[1]).group(1)
    assert re.fullmatch(r"ratio publish/raw: \d+\.\d{3}  \(median of 1 pairs, .*\)", lines[-1])
    assert topic not in _bench_topics(kafka_env.brokers)


@pytest.mark.integration
def test_both_profiles_from_the_load_generator_run_tiny(kafka_env):
    if bench_publish_inputs.repo_root() is None:
        pytest.fail("needs the repository's ./rollout-stream (the TypeScript load generator)")
    lines = _run_bench(kafka_env, "--profile", "both", "--rows", "4")
    profiles = [l.split(":")[0] for l in lines if l.startswith("profile ")]
    assert profiles == ["profile published-max", "profile router-replay"]
    assert sum(bool(re.fullmatch(r"ratio publish/raw: \d+\.\d{3}  \(.*\)", l)) for l in lines) == 2
