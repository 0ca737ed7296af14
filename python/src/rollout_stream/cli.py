"""Command line: ``python -m rollout_stream inspect|bench|bench publish``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import uuid
from typing import Any, Sequence

from . import bench
from .errors import BrokerUnavailableError, RolloutStreamError

# The rest is imported where used: `bench --device cuda --source synth` must
# run where only torch is installed (no numpy, fastavro, confluent-kafka).
DEFAULT_BROKERS = "127.0.0.1:9092"
DEFAULT_REGISTRY_URL = "http://127.0.0.1:8081/apis/ccompat/v7"


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

    from .consumer import MAX_MESSAGE_BYTES
    from .deserializer import PackedDeserializer
    from .json_form import group_to_json
    from .registry import SchemaResolver

    deser = PackedDeserializer(SchemaResolver(args.registry), jagged=args.jagged)
    consumer = Consumer(
        {
            "bootstrap.servers": args.brokers,
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
        while True:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                idle_since = time.monotonic()
                key = msg.key()
                if want is None or key is None or key == want or key.endswith(want):
                    group = deser.decode(msg.value())
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rollout_stream", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="print one decoded packed group")
    p.add_argument("--topic", default=os.environ.get("TOPIC_PREFIX", "") + "rollout.packed")
    p.add_argument("--group", default=None, help="group id to find (default: the first group)")
    p.add_argument("--brokers", default=os.environ.get("KAFKA_BROKERS") or DEFAULT_BROKERS)
    p.add_argument("--registry", default=os.environ.get("SCHEMA_REGISTRY_URL") or DEFAULT_REGISTRY_URL)
    p.add_argument("--jagged", default="auto", choices=["auto", "torch", "numpy"])
    p.add_argument("--first", type=int, default=8, help="values shown per field (default 8)")
    p.add_argument("--json", action="store_true", help="print the SPEC §9 JSON form instead")
    p.add_argument("--timeout", type=float, default=10.0)
    b = sub.add_parser("bench", help="decode throughput vs a plain bytes copy; `bench publish`: publisher vs raw produce")
    bench.add_arguments(b)
    bench_sub = b.add_subparsers(dest="bench_command", metavar="{publish}")
    bp = bench_sub.add_parser(
        "publish",
        help="RolloutPublisher throughput on realistic GymResults vs a raw produce of the same bytes (needs the broker)",
        description="RolloutPublisher.publish_result throughput vs a raw confluent-kafka produce of the same bytes.",
    )
    from . import bench_publish

    bench_publish.add_arguments(bp)
    args = parser.parse_args(argv)
    # torch 2.15's own nested_tensor_from_jagged trips a one-time notice about
    # is_fx_tracing that says nothing about the data; keep the CLI output clean.
    logging.getLogger("torch.fx._symbolic_trace").setLevel(logging.ERROR)
    try:
        if args.command == "inspect":
            return inspect(args)
        if getattr(args, "bench_command", None) == "publish":
            from . import bench_publish

            return bench_publish.run(args)
        return bench.run(args)
    except RolloutStreamError as e:
        print(f"error [{e.code}]: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
