"""``python -m rollout_stream bench publish``: RolloutPublisher throughput against a raw produce of the same bytes.

For each profile it takes realistic NeMo-Gym results (``--input FILE`` of
GymResult JSON lines, else the TypeScript load generator run as a
subprocess: ``./rollout-stream loadgen --format gym-result --dry-run
--profile P``; ``published-max`` = long multi-turn rollouts, ``router-replay``
= the same with ``nrlre1`` routed-experts envelopes), turns them into
``publish_result`` arguments (logprobs as floats, as a worker holds them)
and, before any clock runs, encodes them once through a ``RolloutPublisher``
with an in-memory producer: those are the exact ``(key, value, partition)``
records the real publisher sends. Then, on a scratch topic of its own
(``bench-publish.<id>.rollout.row-completed``, deleted afterwards, with its
registry subject), it times in alternating order:

- ``raw``: a confluent-kafka ``Producer`` with the publisher's settings
  (:func:`~rollout_stream.publisher.producer_settings`: idempotent,
  ``acks=all``, same linger/batch defaults, ``-X`` extras for both)
  producing those pre-encoded records to their partitions, then ``flush``;
  delivery reports only for errors (counted), so no Python runs per record;
- ``publish``: ``RolloutPublisher.publish_result`` for every result
  (validation, JSON, Avro, partitioning, produce with its delivery callback)
  then ``flush``.

A pair is one pass of each; ``ratio publish/raw`` is the median over pairs
of raw seconds ÷ publish seconds (1.0 = publishing costs nothing over
handing librdkafka the bytes). Rates are the median pass's. ``encode only``
is the fastest pass through the in-memory producer (no Kafka), which says
how much of the gap is Python. One untimed pass of each warms the
connections first.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bench_publish_inputs import DEFAULT_ROWS, PROFILES, Workload, build_workloads, results_from_lines
from .bench_publish_kafka import Capture, Kafka
from rollout_stream.errors import DeliveryError, RolloutStreamError

__all__ = ["Kafka", "Workload", "build_workloads", "encode_records", "results_from_lines", "run"]


@dataclass
class Timing:
    """Seconds per pass: raw and publish in pair order, and the fastest in-memory encode pass."""

    raw_s: list[float] = field(default_factory=list)
    publish_s: list[float] = field(default_factory=list)
    encode_s: float = math.inf

    @property
    def ratios(self) -> list[float]:
        return [r / p for r, p in zip(self.raw_s, self.publish_s)]


# ---------------------------------------------------------------- timing


def encode_records(
    results: Sequence[dict[str, Any]], partitions: int, schema_id: int, repeat: int = 1
) -> tuple[list[tuple[bytes, bytes, int]], float]:
    """The records ``publish_result`` sends for ``results``, and the fastest of ``repeat`` more
    in-memory passes in seconds (values dropped as they come, as a producer drops them)."""
    from rollout_stream.publisher import RolloutPublisher

    def one_pass(cap: Capture) -> float:
        pub = RolloutPublisher("bench", topic_prefix="", producer=cap, schema_id=schema_id)
        t0 = time.perf_counter()
        for kw in results:
            pub.publish_result(**kw)
        return time.perf_counter() - t0

    keep = Capture(partitions)
    one_pass(keep)
    best = min(one_pass(Capture(partitions, keep=False)) for _ in range(max(1, repeat)))
    return keep.records, best


class _RawErrors:
    def __init__(self) -> None:
        self.failed = 0
        self.first: str | None = None

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            self.first = self.first or str(err)


def _raw_pass(producer: Any, topic: str, records: Sequence[tuple[bytes, bytes, int]], flush_timeout: float) -> float:
    t0 = time.perf_counter()
    produce, poll = producer.produce, producer.poll
    for key, value, partition in records:
        while True:
            try:
                produce(topic, value=value, key=key, partition=partition)
                break
            except BufferError:
                poll(0.05)
        poll(0)
    left = producer.flush(flush_timeout)
    elapsed = time.perf_counter() - t0
    if left:
        raise DeliveryError(f"raw producer: {left} record(s) to {topic} unacknowledged after {flush_timeout} s", [], topic=topic)
    return elapsed


def _publish_pass(pub: Any, results: Sequence[dict[str, Any]]) -> float:
    t0 = time.perf_counter()
    for kw in results:
        pub.publish_result(**kw)
    pub.flush()
    return time.perf_counter() - t0


def time_workload(w: Workload, kafka: Kafka, args: argparse.Namespace, extra: dict[str, Any]) -> Timing:
    """Creates a scratch topic, runs the warm-up and ``--repeat`` alternating pairs, cleans up."""
    from rollout_stream.publisher import producer_settings

    topic = w.topic = f"bench-publish.{uuid.uuid4().hex[:10]}.rollout.row-completed"
    kafka.create_topic(topic, args.partitions)
    pub = raw = None
    errors = _RawErrors()
    timing = Timing()
    try:
        pub = kafka.publisher(topic, extra)
        # The same bytes, keys and partitions as the publisher sends (its schema id, its partition count).
        w.records, timing.encode_s = encode_records(w.results, pub.num_partitions, pub.schema_id, repeat=3)
        raw = kafka.raw_producer({**producer_settings(kafka.brokers, extra), "delivery.report.only.error": True, "on_delivery": errors})
        _raw_pass(raw, topic, w.records, args.flush_timeout)  # warm-up: connections, metadata, producer ids
        _publish_pass(pub, w.results)
        for i in range(args.repeat):
            order = ("raw", "publish") if i % 2 == 0 else ("publish", "raw")
            for which in order:
                if which == "raw":
                    timing.raw_s.append(_raw_pass(raw, topic, w.records, args.flush_timeout))
                else:
                    timing.publish_s.append(_publish_pass(pub, w.results))
        if errors.failed:
            raise DeliveryError(f"raw producer: {errors.failed} record(s) to {topic} failed; first: {errors.first}", [], topic=topic)
    finally:
        if pub is not None:
            try:
                pub.close()
            except RolloutStreamError as e:
                print(f"warning: closing the publisher: {e}", file=sys.stderr)
        if raw is not None:
            raw.flush(args.flush_timeout)
        kafka.delete_topic(topic)
        if pub is not None:
            kafka.delete_subject(f"{topic}-value")
    return timing


# ---------------------------------------------------------------- output


def _rate_line(label: str, what: str, rows: int, nbytes: int, seconds: float) -> str:
    return f"  {label:<8} {what:<44} {rows / seconds:10.1f} rows/s {nbytes / seconds / 1e6:9.1f} MB/s"


def report(w: Workload, t: Timing, out: Callable[[str], None] = print) -> float:
    """Prints one profile's lines; returns its ratio (median over pairs)."""
    rows, nbytes = len(w.records), w.nbytes
    sizes = [len(v) for _, v, _ in w.records]
    out(
        f"profile {w.name}: {rows} GymResults, {nbytes / 1e6:.2f} MB framed "
        f"({nbytes / rows / 1e3:.1f} kB/row, {min(sizes) / 1e3:.1f}-{max(sizes) / 1e3:.1f} kB) from {w.source}; "
        f"topic {w.topic} (deleted)"
    )
    raw_s, pub_s = statistics.median(t.raw_s), statistics.median(t.publish_s)
    out(_rate_line("raw", "confluent-kafka produce of the same bytes", rows, nbytes, raw_s))
    out(_rate_line("publish", "RolloutPublisher.publish_result + flush", rows, nbytes, pub_s))
    out(_rate_line("encode", "encode only (no Kafka: validation+JSON+Avro)", rows, nbytes, t.encode_s))
    ratios = t.ratios
    ratio = statistics.median(ratios)
    out(f"ratio publish/raw: {ratio:.3f}  (median of {len(ratios)} pairs, {min(ratios):.3f}-{max(ratios):.3f})")
    return ratio


def parse_extra(items: Sequence[str]) -> dict[str, Any]:
    """``-X key=value`` librdkafka settings for both producers."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"-X takes key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def run(args: argparse.Namespace, kafka: Kafka | None = None, root: Path | None = None) -> int:
    """Runs the bench (see the module doc); ``kafka`` and ``root`` are for tests.

    Raises:
        BrokerUnavailableError: No broker answered (checked before anything is generated).
        RegistryUnavailableError / SchemaRegistrationError: From the publisher's start-up.
        RolloutStreamError: Bad options, an unreadable ``--input``, a failing load generator.
        DeliveryError: A pass lost records.
    """
    try:
        if args.repeat < 1 or args.partitions < 1 or (args.rows is not None and args.rows < 1):
            raise ValueError("--repeat, --partitions and --rows must be >= 1")
        extra = parse_extra(args.X)
    except ValueError as e:
        raise RolloutStreamError(str(e)) from None
    kafka = kafka or Kafka(args.brokers, args.registry_url, args.timeout)
    kafka.check()  # fail fast, before generating anything
    t0 = time.perf_counter()
    try:
        workloads = build_workloads(args, root)
    except (OSError, ValueError) as e:
        raise RolloutStreamError(f"bench publish inputs: {e}") from e
    print(
        f"bench publish: brokers {kafka.brokers}, registry {kafka.registry_url}, {args.partitions} partitions, "
        f"{args.repeat} alternating pairs per profile (inputs ready in {time.perf_counter() - t0:.1f} s)"
        + (f", producer extras {extra}" if extra else "")
    )
    for w in workloads:
        report(w, time_workload(w, kafka, args, extra))
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="both", choices=[*PROFILES, "both"], help="load generator profile(s) (default both)")
    p.add_argument("--rows", type=int, default=None, help=f"GymResults per pass (default {DEFAULT_ROWS}; with --input: all its lines)")
    p.add_argument("--repeat", type=int, default=7, help="alternating raw/publish pairs per profile (default 7)")
    p.add_argument("--input", default=None, metavar="FILE", help="GymResult JSON lines to publish instead of generating them")
    p.add_argument("--generations", type=int, default=4, help="rows per group for the load generator (default 4)")
    p.add_argument("--seed", type=int, default=1, help="load generator seed (default 1)")
    p.add_argument("--partitions", type=int, default=4, help="partitions of the scratch topic (default 4)")
    p.add_argument("--brokers", default=os.environ.get("KAFKA_BROKERS") or "127.0.0.1:9092")
    p.add_argument(
        "--registry-url", default=os.environ.get("SCHEMA_REGISTRY_URL") or "http://127.0.0.1:8081/apis/ccompat/v7"
    )
    p.add_argument("--flush-timeout", type=float, default=120.0, help="seconds a pass may wait for acknowledgements")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the broker and registry (default 10)")
    p.add_argument("-X", action="append", default=[], metavar="KEY=VALUE", help="librdkafka setting for both producers (repeatable)")
