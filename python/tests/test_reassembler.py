"""The reassembly state machine (rollout_stream.chunks.Reassembler) on the shared
cases of docs/examples/chunks/cases.json, which test/unit/chunks/reassembler.test.ts
runs too, and a property test: random values cut at random limits and
interleaved come out byte-equal, each in one 64-byte-aligned buffer."""

from __future__ import annotations

import random

import numpy as np
import pytest
from chunk_builders import named_set_id, patch_header, pattern_value, read_chunk_doc

from rollout_stream.chunks import CHUNK_ALIGN, Fetched, Reassembled, Reassembler, split_into_chunks

DOC = read_chunk_doc("cases.json")
VALUES = {n: pattern_value(s["size"], s["seed"]) for n, s in DOC["sets"].items()}
CHUNKS = {n: split_into_chunks(VALUES[n], s["payload"], named_set_id(n)) for n, s in DOC["sets"].items()}
SET_NAMES = {named_set_id(n).hex(): n for n in VALUES}


def _run(case: dict, eager: bool) -> tuple[list[Reassembled], int, int]:
    r = Reassembler(int(case["start"]), case["trusted"], max_held_bytes=case.get("max_held_bytes", 1 << 20),
                    chunk_wait_ms=case.get("chunk_wait_ms", 60_000))
    out: list[Reassembled] = []
    asked = 0
    for i, s in enumerate(case["steps"]):
        if "expire" in s:
            e = s["expire"]
            r.expire(e["now_ms"], fetched_to=int(e["fetched_to"]), last_stable=int(e["last_stable"]), high_watermark=int(e["high_watermark"]))
        else:
            if "set" in s:
                value = patch_header(CHUNKS[s["set"]][s["index"]], s.get("patch", {}))
                value = value[: len(value) - s.get("cut", 0)]
            elif "raw" in s:
                value = bytes.fromhex(s["raw"])
            else:
                value = s["whole"].encode()
            at = s.get("at_ms", 10 * i)
            if r.push(Fetched(int(s["offset"]), value, b"k", {}, at), at, skip=s.get("skip", False)) is not None:
                asked += 1
                assert "log_start" in case, "asked for the log start"
                r.answer_log_start(int(case["log_start"]))
        if eager:
            out += r.take()
    out += r.take()
    return out, asked, r.restarted


def _describe(o: Reassembled) -> dict:
    base = {"kind": o.kind, "offset": str(o.offset), "last_offset": str(o.last_offset), "next": str(o.next_offset)}
    if o.kind == "record":
        value = bytes(o.value)
        name = next((n for n, v in VALUES.items() if v == value), None) if o.chunks > 1 else None
        return {**base, "chunks": o.chunks, "value": f"set:{name}" if name else value.decode()}
    if o.kind == "skipped":
        return {**base, "chunks": o.chunks}
    if o.kind == "incomplete":
        i = o.incomplete
        return {**base, "set": SET_NAMES.get(i.set_id, i.set_id), "have": i.have, "count": i.count, "detail": i.detail}
    return base


@pytest.mark.parametrize("case", DOC["cases"], ids=lambda c: c["name"])
@pytest.mark.parametrize("eager", [True, False], ids=["take-each-step", "take-at-end"])
def test_shared_case(case, eager):
    out, asked, restarted = _run(case, eager)
    assert [_describe(o) for o in out] == case["want"]
    assert asked == case.get("asked", asked)
    assert restarted == case.get("restarted", 0)


def _address(view: memoryview) -> int:
    return np.frombuffer(view, np.uint8).ctypes.data


def test_a_reassembled_value_is_one_read_only_aligned_buffer_and_a_whole_one_is_passed_through():
    r = Reassembler(0, True, max_held_bytes=1 << 20, chunk_wait_ms=1000)
    whole = b'{"x":1}'
    for i, c in enumerate(CHUNKS["a"]):
        r.push(Fetched(i, c, headers=[("batch_id", f"b{i}".encode())], timestamp=100 + i), 0)
    r.push(Fetched(3, whole), 0)
    rec, plain = r.take()
    assert _address(rec.value) % CHUNK_ALIGN == 0 and rec.value.readonly
    assert rec.first.headers == [("batch_id", b"b0")] and rec.first.timestamp == 100
    assert plain.value is whole


@pytest.mark.parametrize("seed", range(60))
def test_random_values_cut_at_random_limits_and_interleaved_come_out_byte_equal_and_aligned(seed):
    rnd = random.Random(seed)
    sets = []
    for k in range(rnd.randint(1, 4)):
        payload = 64 * rnd.randint(1, 16)
        value = rnd.randbytes(rnd.randint(payload + 1, 3000 + payload))
        sets.append((value, split_into_chunks(value, payload, named_set_id(f"p{k}"))))
    cursors = [0] * len(sets)
    stream: list[tuple[int, bytes]] = []
    while len(stream) < sum(len(c) for _, c in sets):
        k = rnd.choice([k for k in range(len(sets)) if cursors[k] < len(sets[k][1])])
        stream.append((k, sets[k][1][cursors[k]]))
        cursors[k] += 1
    r = Reassembler(0, True, max_held_bytes=1 << 30, chunk_wait_ms=1000)
    out: list[Reassembled] = []
    for o, (_, chunk) in enumerate(stream):
        r.push(Fetched(o, chunk), 0)
        out += r.take()
    firsts = [next(o for o, (j, _) in enumerate(stream) if j == k) for k in range(len(sets))]
    lasts = [max(o for o, (j, _) in enumerate(stream) if j == k) for k in range(len(sets))]
    order = sorted(range(len(sets)), key=lambda k: firsts[k])
    assert [o.offset for o in out] == [firsts[k] for k in order]
    for i, (o, k) in enumerate(zip(out, order, strict=True)):
        assert o.kind == "record" and bytes(o.value) == sets[k][0]
        assert _address(o.value) % CHUNK_ALIGN == 0
        later = [firsts[j] for j in order[i + 1 :]]
        assert o.next_offset == min([lasts[k] + 1, *later])
    assert r.open_sets == 0


def test_the_sets_it_remembers_to_drop_are_bounded():
    """The oldest forgotten id makes its next chunk headless again; a remembered one is dropped."""
    r = Reassembler(0, False, max_held_bytes=1 << 20, chunk_wait_ms=1000)
    sets = [split_into_chunks(pattern_value(129, 1), 64, named_set_id(f"d{i}")) for i in range(1025)]
    for i, chunks in enumerate(sets):
        r.push(Fetched(i, chunks[1]), 0)
    r.push(Fetched(2000, sets[1024][2]), 0)
    r.push(Fetched(2001, sets[0][2]), 0)
    out = r.take()
    assert len(out) == 1026
    assert out[-1].kind == "incomplete" and out[-1].offset == 2001 and out[-1].incomplete.set_id == named_set_id("d0").hex()


def test_without_verify_crc_a_short_value_is_still_an_incomplete_record():
    r = Reassembler(0, True, max_held_bytes=1 << 20, chunk_wait_ms=1000, verify_crc=False)
    a = CHUNKS["a"]
    for i, c in enumerate([a[0], a[1], a[2][:-4]]):
        r.push(Fetched(i, c), 0)
    (out,) = r.take()
    assert out.kind == "incomplete" and out.incomplete.detail == "crc_mismatch"


def test_without_verify_crc_no_crc_is_computed(monkeypatch):
    import rollout_stream.chunks as chunks

    def no_crc(*_):
        raise AssertionError("crc32 called with verify_crc=False")

    monkeypatch.setattr(chunks.zlib, "crc32", no_crc)
    r = Reassembler(0, True, max_held_bytes=1 << 20, chunk_wait_ms=1000, verify_crc=False)
    for i, c in enumerate(CHUNKS["a"]):
        r.push(Fetched(i, c), 0)
    (out,) = r.take()
    assert out.kind == "record" and bytes(out.value) == VALUES["a"]


def test_offsets_must_increase_and_a_question_must_be_answered():
    r = Reassembler(5, True, max_held_bytes=1 << 20, chunk_wait_ms=1000)
    assert r.push(Fetched(5, CHUNKS["a"][1]), 0) == named_set_id("a").hex()
    with pytest.raises(RuntimeError, match="answer"):
        r.push(Fetched(6, CHUNKS["a"][2]), 0)
    r.answer_log_start(0)
    with pytest.raises(RuntimeError, match="after"):
        r.push(Fetched(5, b"{}"), 0)
