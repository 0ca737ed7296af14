"""``python -m rollout_stream bench --skip-stale``: stale groups skipped from headers vs found by decoding.

Builds the bench's realistic groups (16 rows of 4k–32k tokens by default),
half of them stale (weight version ``current − k − 1``, alternating with
fresh ones at ``current``), as Confluent-framed records — once with the
``weight_version``/``batch_id`` headers the stages write, once without —
and runs the real :func:`rollout_stream.feed` over them
(``current_weight_version``, ``max_weight_lag=k``, a no-op ``put_samples``)
through an in-memory consumer with :class:`PackedConsumer`'s record path
(no broker: fetching costs the same either way and would only blur the
comparison). Interleaved passes, the fastest counts:

- ``stream``: all groups, half stale. With headers the stale half is
  dropped undecoded; without, every group is decoded to read its version.
  The fresh half is decoded in both runs, so this ratio stays near
  ``1 / (1 − stale share)`` = 2 (more where the stale groups happen to be
  the larger ones, or decoding them costs page faults the skip avoids).
- ``stale only``: the stale groups alone — what the headers change: a
  header skip against a decode that finds the group stale.

The last line is ``ratio skip/decode: <stale-only decode s ÷ header-skip s>``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any


class _Message:
    """The slice of confluent-kafka's ``Message`` the consumer's record path reads."""

    __slots__ = ("_value", "_key", "_headers", "_offset")

    def __init__(self, value: bytes, key: bytes, headers: list | None, offset: int) -> None:
        self._value, self._key, self._headers, self._offset = value, key, headers, offset

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes:
        return self._key

    def headers(self) -> list | None:
        return self._headers

    def topic(self) -> str:
        return "bench.rollout.packed"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)


class MemoryConsumer:
    """:class:`PackedConsumer`'s record path (``Record.of``, decode into a ``Delivery``, done) over a list."""

    commit_mode = "on_checkpoint"

    def __init__(self, messages: list[_Message], deserializer: Any) -> None:
        self.messages = messages
        self.deserializer = deserializer
        self.i = 0
        self.position = 0

    def poll_record(self, timeout: float) -> Any:
        from rollout_stream.record_meta import Record

        if self.i >= len(self.messages):
            return None
        m = self.messages[self.i]
        self.i += 1
        return Record.of(m, 1)

    def decode(self, record: Any, defer_done: bool = False) -> Any:
        from rollout_stream.consumer import Delivery

        return Delivery(self.deserializer.decode(record.message.value()), record.message, record.epoch)

    def is_current(self, item: Any) -> bool:
        return True

    def done(self, items: Any, commit_now: bool = True) -> None:
        for it in items:
            self.position = max(self.position, it.offset + 1)

    def flush_commits(self) -> None:
        pass

    def rewind(self, items: Any) -> None:
        pass


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from rollout_stream import feed
    from rollout_stream.codec import resolve_mode
    from rollout_stream.deserializer import PackedDeserializer
    from rollout_stream.encode import encode_packed_value, load_packed_schema
    from rollout_stream.registry import StaticResolver

    from .bench import SCHEMA_ID, build_group

    k, current = 2, 100
    schema = load_packed_schema()
    rng = np.random.default_rng(args.seed)
    routes = tuple(int(x) for x in args.routed_experts.split("x")) if args.routed_experts else None
    n = max(2, args.groups)
    values, versions = [], []
    for i in range(n):
        rec = build_group(rng, f"bench-{i}", rows=args.rows, min_tokens=args.min_tokens, max_tokens=args.max_tokens,
                          narrow=args.wire == "narrow", routed_experts=routes)
        version = current if i % 2 == 0 else current - k - 1
        for t in rec["tags"]:
            t["weight_version"] = version
        values.append(encode_packed_value(rec, SCHEMA_ID, schema))
        versions.append(version)
    total = sum(len(v) for v in values)
    mode = resolve_mode("auto" if args.jagged == "both" else args.jagged)
    deser = PackedDeserializer(StaticResolver({SCHEMA_ID: schema}), jagged=mode)
    deser.decode(values[0])  # imports and caches warm, outside the timing

    def messages(idx: list[int], headers: bool) -> list[_Message]:
        out = []
        for off, i in enumerate(idx):
            h = [("weight_version", str(versions[i]).encode()), ("batch_id", b"bench-batch")] if headers else None
            out.append(_Message(values[i], f"bench-{i}".encode(), h, off))
        return out

    every = list(range(n))
    stale_idx = [i for i in every if versions[i] < current - k]
    streams = {
        "stream skip": messages(every, True),
        "stream decode": messages(every, False),
        "stale skip": messages(stale_idx, True),
        "stale decode": messages(stale_idx, False),
    }
    expect = {"stream skip": n - len(stale_idx), "stream decode": n - len(stale_idx), "stale skip": 0, "stale decode": 0}
    best = {name: float("inf") for name in streams}
    for _ in range(args.repeat):
        for name, msgs in streams.items():
            consumer = MemoryConsumer(msgs, deser)
            t0 = time.perf_counter()
            stats = feed(consumer, lambda s, f, t: None, poll_timeout=0, idle_timeout=0,
                         current_weight_version=current, max_weight_lag=k)
            best[name] = min(best[name], time.perf_counter() - t0)
            if stats.groups != expect[name] or consumer.position != len(msgs):
                raise AssertionError(f"{name}: delivered {stats.groups}, position {consumer.position} of {len(msgs)}")
    print(
        f"payload: {n} groups x {args.rows} rows, {args.min_tokens}-{args.max_tokens} tokens/row, half stale "
        f"(weight lag {k + 1} > max_weight_lag {k}), wire {args.wire}, routed_experts {args.routed_experts or 'none'}, "
        f"jagged={mode}; {total / 1e6:.1f} MB in {n} records; feed() over an in-memory consumer, fastest of {args.repeat}"
    )
    ns = len(stale_idx)
    for name, count in (("stream decode", n), ("stream skip", n), ("stale decode", ns), ("stale skip", ns)):
        how = "headers: stale groups skipped undecoded" if name.endswith("skip") else "no headers: every group decoded"
        print(f"{name:<14} {count / best[name]:11.1f} groups/s  {best[name] / count * 1e6:9.1f} us/group  ({how})")
    print(f"stream ratio skip/decode: {best['stream decode'] / best['stream skip']:.2f}  "
          "(the fresh half is decoded in both runs)")
    print(f"ratio skip/decode: {best['stale decode'] / best['stale skip']:.1f}")
    return 0
