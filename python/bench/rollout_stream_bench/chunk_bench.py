"""``python -m rollout_stream bench --chunk 1MiB``: decoding a reassembled chunk set against the whole value.

The same packed records as ``bench`` are cut into chunk sets for a topic whose
``max.message.bytes`` is the given size (the chunk payload is the writers'
``chunk_budget``), reassembled by :class:`~rollout_stream.chunks.Reassembler`
into one 64-byte-aligned buffer each, and decoded. Printed:

- ``ratio chunked/whole``: decode time of the unchunked values ÷ decode time of
  the reassembled buffers (per record the fastest of ``--repeat`` tries, the
  two decoded back to back) (1.0: chunking costs the decoder nothing; the
  target is ≥ 0.9). The assembly is not inside it.
- the assembly itself (payload copies into the buffer, header checks), in
  ms/GB, without and with the whole-value CRC-32 (``verify_chunk_crc``).
"""

from __future__ import annotations

import argparse
import os
import re
import time
from typing import Any

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "kb": 1000, "m": 1 << 20, "mib": 1 << 20, "mb": 10**6,
          "g": 1 << 30, "gib": 1 << 30, "gb": 10**9}


def parse_size(text: str) -> int:
    """``1MiB``, ``8MiB``, ``512KiB``, ``1048576`` → bytes.

    Raises:
        argparse.ArgumentTypeError: Not a size.
    """
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 1MiB, 8MiB, 1048576)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def assemble(sets: list[list[bytes]], verify_crc: bool) -> list[memoryview]:
    """Each set through a fresh Reassembler: the whole values (aligned, read-only buffers)."""
    from rollout_stream.chunks import Fetched, Reassembler

    out = []
    for chunks in sets:
        r = Reassembler(0, True, max_held_bytes=1 << 40, chunk_wait_ms=60_000, verify_crc=verify_crc)
        for i, c in enumerate(chunks):
            r.push(Fetched(i, c), 0)
        (done,) = r.take()
        assert done.kind == "record", done
        out.append(done.value)
    return out


def run(args: argparse.Namespace, values: list[bytes], resolver: Any, schema_id: int, modes: list[str]) -> int:
    from rollout_stream.chunk_producer import chunk_budget
    from rollout_stream.chunks import split_into_chunks
    from rollout_stream.deserializer import PackedDeserializer

    limit = args.chunk
    payload = chunk_budget(limit, b"bench-group-00", [("weight_version", b"7"), ("batch_id", b"bench-batch")])
    fits = [v for v in values if len(v) <= payload]
    values = [v for v in values if len(v) > payload]  # only what a writer would chunk is compared
    if not values:
        print(f"error: every record fits in one {payload}-byte chunk; make them larger (--rows, --max-tokens, --routed-experts)")
        return 2
    if fits:
        print(f"left out {len(fits)} records that fit in one chunk (they are not chunked)")
    sets = [split_into_chunks(v, payload, os.urandom(16)) for v in values]
    total = sum(len(v) for v in values)
    print(f"{len(values)} records ({total / 1e6:.1f} MB) as chunk sets for a {limit}-byte topic limit: payload {payload} bytes, "
          f"{sum(len(s) for s in sets)} chunks ({min(len(s) for s in sets)}-{max(len(s) for s in sets)} per set)")
    bufs = assemble(sets, verify_crc=True)
    assert all(bytes(b) == v for b, v in zip(bufs, values)), "a reassembled value differs from its original"

    best_asm: dict[str, float] = {"copy": float("inf"), "copy+crc": float("inf")}
    for _ in range(args.repeat):
        for name, crc in (("copy", False), ("copy+crc", True)):
            t0 = time.perf_counter()
            assemble(sets, verify_crc=crc)
            best_asm[name] = min(best_asm[name], time.perf_counter() - t0)
    for name, s in best_asm.items():
        print(f"assembly {name:<9}               {s / total * 1e12:9.1f} ms/GB  ({total / s / 1e6:.1f} MB/s)")

    ratios = {}
    for mode in modes:
        deser = PackedDeserializer(resolver, jagged=mode)
        deser.decode(values[0])
        deser.decode(bufs[0])
        # Each record decoded whole and reassembled back to back, the fastest of --repeat tries per record
        # counts: load from other processes hits both alike, and a burst spoils one try, not a pass.
        whole_best = [float("inf")] * len(values)
        chunked_best = [float("inf")] * len(values)
        for _ in range(args.repeat):
            for i, (v, b) in enumerate(zip(values, bufs)):
                t0 = time.perf_counter()
                deser.decode(v)
                t1 = time.perf_counter()
                deser.decode(b)
                t2 = time.perf_counter()
                whole_best[i] = min(whole_best[i], t1 - t0)
                chunked_best[i] = min(chunked_best[i], t2 - t1)
        whole_s, chunked_s = sum(whole_best), sum(chunked_best)
        ratios[mode] = whole_s / chunked_s
        print(f"decode jagged={mode:<6} whole   {total / whole_s / 1e6:9.1f} MB/s   chunked {total / chunked_s / 1e6:9.1f} MB/s"
              f"   ratio {ratios[mode]:.3f}")
    from rollout_stream.codec import resolve_mode

    default = resolve_mode("auto")
    print(f"ratio chunked/whole: {ratios.get(default, next(iter(ratios.values()))):.3f}")
    return 0
