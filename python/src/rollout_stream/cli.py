"""Command line: ``python -m rollout_stream inspect|replay|collect|bench|bench publish``.

The benchmarks are not part of the installed package: they live in
``python/bench/rollout_stream_bench`` of a checkout, which ``bench`` finds
next to ``python/src`` (or on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any, Sequence

from . import kafka_env
from .errors import BrokerUnavailableError, RolloutStreamError

# The rest is imported where used: `bench --device cuda --source synth` must
# run where only torch is installed (no numpy, fastavro, confluent-kafka).
DEFAULT_BROKERS = kafka_env.DEFAULT_BROKERS
DEFAULT_REGISTRY_URL = kafka_env.DEFAULT_REGISTRY_URL


def _first(val: Any, k: int) -> list:
    import numpy as np

    from .codec import JaggedArray

    if isinstance(val, JaggedArray):
        v = val.values
    elif getattr(val, "is_nested", False):
        v = val.values().numpy()
    else:
        v = val if isinstance(val, np.ndarray) else val.numpy()
    return v.reshape(-1)[:k].tolist()


def describe(group: Any, first: int = 8) -> str:
    """Human-readable summary: ids, every field's kind/dtype/shape/first values, tags."""
    import numpy as np

    from .codec import JaggedArray

    lines = [
        f"group_id: {group.group_id}",
        f"batch_id: {group.batch_id}",
        f"schema_id: {group.schema_id}",
        f"rows: {len(group.sample_ids)}  sample_ids: {group.sample_ids}",
        "fields:",
    ]
    for name, val in group.fields.items():
        info = group.field_info.get(name, {})
        wire = f" (wire {info['wire_dtype']})" if info.get("wire_dtype") not in (None, info.get("dtype")) else ""
        if isinstance(val, JaggedArray) or getattr(val, "is_nested", False):
            lens = val.lengths.tolist() if isinstance(val, JaggedArray) else val.offsets().diff().tolist()
            inner = list(val.inner_shape) if isinstance(val, JaggedArray) else list(val.shape[2:])
            kind = f"jagged [{len(lens)}, j, {', '.join(map(str, inner))}]" if inner else f"jagged [{len(lens)}, j]"
            desc = f"{kind} row lengths {lens}"
        elif isinstance(val, np.ndarray) and val.dtype == object:
            desc = f"object [{len(val)}]"
        else:
            desc = f"dense {list(val.shape)}"
        dtype = str(getattr(val, "dtype", "object")).replace("torch.", "")
        lines.append(f"  {name}: {desc} {dtype}{wire} first {_first(val, first) if dtype != 'object' else list(val[:2])}")
    lines.append("tags:")
    for sid, tag in zip(group.sample_ids, group.tags):
        lines.append(f"  {sid}: {json.dumps(tag)}")
    return "\n".join(lines)


def inspect(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    from .chunk_stream import ChunkedPartitions, record_error
    from .consumer import MAX_MESSAGE_BYTES
    from .deserializer import PackedDeserializer
    from .json_form import group_to_json
    from .registry import SchemaResolver

    deser = PackedDeserializer(SchemaResolver(args.registry), jagged=args.jagged)
    consumer = Consumer(
        {
            **kafka_env.client_config(args.brokers),
            "group.id": f"rollout-stream-inspect-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.max.bytes": MAX_MESSAGE_BYTES,
            "max.partition.fetch.bytes": MAX_MESSAGE_BYTES,
            "receive.message.max.bytes": MAX_MESSAGE_BYTES + 1024 * 1024,
        }
    )
    try:
        try:
            md = consumer.list_topics(args.topic, timeout=args.timeout)
        except KafkaException as e:
            raise BrokerUnavailableError(f"no Kafka broker answered at {args.brokers}: {e.args[0]}") from e
        topic_md = md.topics.get(args.topic)
        if topic_md is None or topic_md.error is not None or not topic_md.partitions:
            print(f"topic {args.topic!r} not found on {args.brokers}", file=sys.stderr)
            return 1
        parts = [TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in topic_md.partitions]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=args.timeout)[1] for tp in parts}
        consumer.assign(parts)
        want = args.group.encode() if args.group else None
        idle_since = time.monotonic()
        # Chunk sets come out whole (CRC checked); a set whose head is gone is reported and passed over.
        chunks = ChunkedPartitions(lambda t, p: consumer.get_watermark_offsets(TopicPartition(t, p), timeout=args.timeout)[0],
                                   verify_crc=True)
        while True:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                idle_since = time.monotonic()
                for rec in chunks.push(msg):
                    if rec.incomplete is not None or rec.error is not None:
                        print(f"skipped: {record_error(rec)}", file=sys.stderr)
                        continue
                    key = rec.message.key()
                    if want is None or key is None or key == want or key.endswith(want):
                        group = deser.decode(rec.value)
                        if want is None or group.group_id == args.group:
                            print(json.dumps(group_to_json(group)) if args.json else describe(group, args.first))
                            return 0
            positions = consumer.position([TopicPartition(args.topic, p) for p in ends])
            if all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition] for tp in positions):
                break
            # read_committed stops at an open transaction: give up after --timeout quiet seconds
            if time.monotonic() - idle_since > args.timeout:
                break
        what = f"group {args.group!r}" if args.group else "any packed group"
        print(f"{what} not found in {args.topic!r} (read up to offsets {ends})", file=sys.stderr)
        return 1
    finally:
        consumer.close()


def load_callable(spec: str) -> Any:
    """``module:function`` (``module.sub:obj.attr`` too) → the object; the cwd is importable.

    Raises:
        ValueError: Not ``module:function``, or the object is not callable.
        ImportError, AttributeError: The module or name does not exist.
    """
    import importlib

    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise ValueError(f"--put wants module:function, got {spec!r}")
    if "" not in sys.path:
        sys.path.insert(0, "")
    obj: Any = importlib.import_module(mod_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{spec} is not callable")
    return obj


def _offsets_arg(text: str) -> tuple[int, tuple[int, int | None]]:
    """``P:START-END``, ``P:START-`` or ``P:START`` (END exclusive)."""
    try:
        part, _, rng = text.partition(":")
        start, dash, end = rng.partition("-")
        return int(part), (int(start), int(end) if dash and end else None)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want PARTITION:START[-END], got {text!r}") from None


class _Progress:
    """A one-line progress bar on stderr (a line per partition when stderr is not a terminal)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last = 0.0
        self.partition: int | None = None

    def __call__(self, stats: Any, partition: int, offset: int, end: int) -> None:
        start = stats.ranges[partition][0]
        done = offset + 1 - start
        total = max(1, end - start)
        if self.tty:
            now = time.monotonic()
            if now - self.last < 0.1 and offset + 1 < end:
                return
            self.last = now
            width = 30
            fill = int(width * done / total)
            self.stream.write(
                f"\r[{'#' * fill}{'.' * (width - fill)}] partition {partition} {done}/{total} records, "
                f"{stats.groups} groups replayed"
            )
            if offset + 1 >= end:
                self.stream.write("\n")
        elif offset + 1 >= end:
            self.stream.write(f"partition {partition}: {done}/{total} records read, {stats.groups} groups replayed so far\n")
        self.stream.flush()


def replay_cmd(args: argparse.Namespace) -> int:
    from .replay_reader import ReplayStats, replay

    if not (args.batch or args.from_time or args.to_time or args.offsets or args.all):
        print("error: say what to replay: --batch ID, --from-time/--to-time, --offsets P:START-END or --all", file=sys.stderr)
        return 2
    try:
        put = load_callable(args.put) if args.put else None
    except (ValueError, ImportError, AttributeError) as e:
        print(f"error: --put {args.put}: {e}", file=sys.stderr)
        return 2
    out = None
    if args.to_jsonl == "-":
        out = sys.stdout
    elif args.to_jsonl:
        out = open(args.to_jsonl, "w", encoding="utf-8")
    if put is None and out is None:
        out = sys.stdout
    stats = ReplayStats()
    try:
        replay(
            args.topic,
            put,
            to_jsonl=out,
            brokers=args.brokers,
            registry_url=args.registry,
            batch_ids=args.batch or None,
            from_time=args.from_time,
            to_time=args.to_time,
            offsets=dict(args.offsets) if args.offsets else None,
            jagged=args.jagged,
            timeout=args.timeout,
            stats=stats,
            progress=None if args.quiet else _Progress(sys.stderr),
        )
    finally:
        if out is not None and out is not sys.stdout:
            out.close()
    print(stats.summary(args.topic), file=sys.stderr)
    return 1 if stats.stopped_early else 0


BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"  # python/bench in a checkout


def bench_modules() -> Any:
    """The ``rollout_stream_bench`` package, or ``None`` when this install has no benches.

    Tries an installed/``PYTHONPATH`` one first, then ``python/bench`` of the
    checkout this package was imported from (an editable install, or
    ``PYTHONPATH=python/src`` as ``scripts/gpu-bench.sh`` sets it).
    """
    import importlib
    import importlib.util

    if importlib.util.find_spec("rollout_stream_bench") is None:
        if not (BENCH_DIR / "rollout_stream_bench" / "__init__.py").is_file():
            return None
        sys.path.insert(0, str(BENCH_DIR))
    return importlib.import_module("rollout_stream_bench")


NO_BENCH = (
    "the benchmarks are not installed with the library: run `python -m rollout_stream bench` from a checkout "
    "of the repository (they live in python/bench/rollout_stream_bench) or put that python/bench folder on PYTHONPATH"
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rollout_stream", description=__doc__)
    from . import __version__

    parser.add_argument("--version", action="version", version=f"rollout-stream {__version__} (Python package)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="print one decoded packed group")
    p.add_argument("--topic", default=kafka_env.topic("rollout.packed"))
    p.add_argument("--group", default=None, help="group id to find (default: the first group)")
    p.add_argument("--brokers", default=kafka_env.brokers())
    p.add_argument("--registry", default=kafka_env.registry_url())
    p.add_argument("--jagged", default="auto", choices=["auto", "torch", "numpy"])
    p.add_argument("--first", type=int, default=8, help="values shown per field (default 8)")
    p.add_argument("--json", action="store_true", help="print the JSON form (docs/formats.md) instead")
    p.add_argument("--timeout", type=float, default=10.0)
    r = sub.add_parser(
        "replay",
        help="hand past packed groups (chosen batches, a time range, offsets) to put_samples or write JSON lines",
        description=textwrap.fill("Reads rollout.packed over a fixed range, partition by partition in offset order, and hands "
        "each matching group to --put module:function (called as put_samples(sample_ids, fields, tags)) or writes "
        "its JSON form (docs/formats.md) as one line to --to-jsonl (default: stdout). Joins no consumer group and commits "
        "nothing; stops at the end of the range. Progress and a summary line go to stderr. "
        "Exit 0, 1 when a partition's end could not be reached within --timeout quiet seconds "
        "(an open transaction), 2 on errors.", 90),
        epilog="examples:\n"
        "  python -m rollout_stream replay --batch step-41 --to-jsonl step-41.jsonl\n"
        "  python -m rollout_stream replay --batch step-41 --batch step-42 --put my_trainer.debug:put_samples\n"
        "  python -m rollout_stream replay --from-time 2026-12-02T10:00:00Z --to-time 2026-12-02T10:05:00Z\n"
        "  python -m rollout_stream replay --offsets 0:120-180 --offsets 1:95- --to-jsonl -",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("--topic", default=kafka_env.topic("rollout.packed"),
                   help="packed topic (default $TOPIC_PREFIX + rollout.packed)")
    r.add_argument("--batch", action="append", default=[], metavar="ID", help="a batch id to replay (repeatable)")
    r.add_argument("--from-time", default=None, metavar="T", help="records at or after T (ms since epoch or ISO-8601)")
    r.add_argument("--to-time", default=None, metavar="T", help="records before T (ms since epoch or ISO-8601)")
    r.add_argument("--offsets", action="append", type=_offsets_arg, default=[], metavar="P:START[-END]",
                   help="read only partition P from START to END (exclusive; default the end); repeatable")
    r.add_argument("--all", action="store_true", help="replay every group of the topic")
    dest = r.add_mutually_exclusive_group()
    dest.add_argument("--to-jsonl", default=None, metavar="FILE", help="write JSON lines to FILE ('-': stdout)")
    dest.add_argument("--put", default=None, metavar="MODULE:FUNCTION",
                      help="call this put_samples(sample_ids, fields, tags) per group (the cwd is importable)")
    r.add_argument("--brokers", default=kafka_env.brokers())
    r.add_argument("--registry", default=kafka_env.registry_url())
    r.add_argument("--jagged", default="auto", choices=["auto", "torch", "numpy"])
    r.add_argument("--timeout", type=float, default=10.0, help="seconds for broker requests and quiet waits (default 10)")
    r.add_argument("--quiet", action="store_true", help="no progress output (the summary line stays)")
    from .gym import command as collect_command

    collect_command.add_parser(sub)
    b = sub.add_parser(
        "bench",
        help="decode throughput vs a plain bytes copy; `--skip-stale`: header skip vs decoding; "
        "`bench publish`: publisher vs raw produce; `bench collect`: collect's CPU with and without publishing (from a checkout)",
    )
    benches = bench_modules()
    if benches is not None:
        from rollout_stream_bench import bench, bench_collect, bench_publish

        bench.add_arguments(b)
        bench_sub = b.add_subparsers(dest="bench_command", metavar="{publish,collect}")
        bp = bench_sub.add_parser(
            "publish",
            help="RolloutPublisher throughput on realistic GymResults vs a raw produce of the same bytes (needs the broker)",
            description="RolloutPublisher.publish_result throughput vs a raw confluent-kafka produce of the same bytes.",
        )
        bench_publish.add_arguments(bp)
        bc = bench_sub.add_parser(
            "collect",
            help="the NeMo-Gym collector's CPU per rollout, publishing vs writing nothing (needs the broker and NeMo-Gym's venv)",
            description="CPU of `collect` per rollout with publishing against the same collection writing nothing.",
        )
        bench_collect.add_arguments(bc)
    else:
        b.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    # torch 2.15's own nested_tensor_from_jagged trips a one-time notice about
    # is_fx_tracing that says nothing about the data; keep the CLI output clean.
    logging.getLogger("torch.fx._symbolic_trace").setLevel(logging.ERROR)
    try:
        if args.command == "inspect":
            return inspect(args)
        if args.command == "replay":
            return replay_cmd(args)
        if args.command == "collect":
            return collect_command.run(args)
        if benches is None:
            print(f"error: {NO_BENCH}", file=sys.stderr)
            return 2
        if getattr(args, "bench_command", None) == "publish":
            from rollout_stream_bench import bench_publish

            return bench_publish.run(args)
        if getattr(args, "bench_command", None) == "collect":
            from rollout_stream_bench import bench_collect

            return bench_collect.run(args)
        from rollout_stream_bench import bench

        return bench.run(args)
    except RolloutStreamError as e:
        print(f"error [{e.code}]: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
