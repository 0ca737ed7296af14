"""PackedConsumer's reassembly path without a broker: chunk sets fed through the
client seam (``PackedConsumer._client_class``) come out as one record at their
first chunk's offset, decode in place from one 64-byte-aligned buffer, commit
past their last chunk, and whatever cannot be handed on whole is raised or
dead-lettered, never passed to ``put_samples``."""

from __future__ import annotations

import os

import numpy as np
import pytest
from builders import clean, routed_group, versioned_group

from rollout_stream import feed
from rollout_stream.chunks import IncompleteRecordError, split_into_chunks
from rollout_stream.consumer import PackedConsumer
from rollout_stream.deserializer import PackedDeserializer
from rollout_stream.encode import encode_packed_value, load_packed_schema
from rollout_stream.errors import DecodeError
from rollout_stream.registry import StaticResolver

TOPIC = "t.rollout.packed"
SCHEMA = load_packed_schema()


def value_of(rec: dict) -> bytes:
    return encode_packed_value(clean(rec), 1, SCHEMA)


class Msg:
    def __init__(self, offset: int, value: bytes, key: bytes = b"g", partition: int = 0, headers=None):
        self._o, self._v, self._k, self._p, self._h = offset, value, key, partition, headers or []

    def topic(self): return TOPIC
    def partition(self): return self._p
    def offset(self): return self._o
    def value(self): return self._v
    def key(self): return self._k
    def headers(self): return self._h
    def timestamp(self): return (1, 1000 + self._o)
    def error(self): return None


class FakeClient:
    """The few confluent-kafka Consumer calls PackedConsumer makes, over one scripted log per partition."""

    logs: dict[int, list[Msg]] = {}
    low: int = 0
    committed_at: dict[int, int] = {}

    def __init__(self, conf):
        self.conf = conf
        self.pos: dict[int, int] = {}
        self.commits: list[dict[int, int]] = []
        self.seeks: list[tuple[int, int]] = []
        self._assigned = False
        FakeClient.last = self

    def list_topics(self, *a, **k): return None
    def subscribe(self, topics, on_assign, on_revoke, on_lost): self._on_assign = on_assign

    def committed(self, tps, timeout=None):
        from confluent_kafka import TopicPartition
        return [TopicPartition(tp.topic, tp.partition, self.committed_at.get(tp.partition, -1001)) for tp in tps]

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        log = self.logs.get(tp.partition, [])
        return (self.low, (log[-1].offset() + 1) if log else 0)

    def assign(self, tps):
        for tp in tps:
            self.pos[tp.partition] = tp.offset

    def seek(self, tp):
        self.seeks.append((tp.partition, tp.offset))
        self.pos[tp.partition] = tp.offset

    def poll(self, timeout):
        if not self._assigned:
            from confluent_kafka import TopicPartition
            self._assigned = True
            self._on_assign(self, [TopicPartition(TOPIC, p) for p in sorted(self.logs)])
        for p in sorted(self.pos):
            for m in self.logs[p]:
                if m.offset() >= self.pos[p]:
                    self.pos[p] = m.offset() + 1
                    return m
        return None

    def commit(self, offsets, asynchronous):
        self.commits.append({tp.partition: tp.offset for tp in offsets})

    def close(self): pass


def consumer(logs: dict[int, list[Msg]], committed: dict[int, int] | None = None, **kw) -> tuple[PackedConsumer, FakeClient]:
    class Client(FakeClient):
        pass

    Client.logs, Client.committed_at = logs, committed or {}

    class Chunked(PackedConsumer):
        _client_class = Client

    c = Chunked(TOPIC, "trainer", "127.0.0.1:1", check=False, instance_id=False,
                deserializer=PackedDeserializer(StaticResolver({1: SCHEMA}), jagged="numpy"), **kw)
    return c, Client.last


def chunked(offset: int, value: bytes, payload: int, set_id: bytes = b"s" * 16, **kw) -> list[Msg]:
    return [Msg(offset + i, c, **kw) for i, c in enumerate(split_into_chunks(value, payload, set_id))]


def test_a_chunk_set_is_one_record_at_its_first_chunk_committed_past_its_last_and_decoded_in_place():
    big = value_of(routed_group("moe-1", lengths=(400, 0, 600), layers=4, topk=4))
    whole = value_of(versioned_group("small", 11))
    log = [Msg(0, whole, b"small")] + chunked(1, big, 1024, key=b"moe-1") + [Msg(1 + -(-len(big) // 1024), whole, b"small")]
    n = len(log)
    c, client = consumer({0: log}, verify_chunk_crc=True)
    assert client.conf["check.crcs"] is True
    got = []
    stats = feed(c, lambda ids, fields, tags: got.append(fields), idle_timeout=0, poll_timeout=0)
    assert stats.groups == 3
    moe = got[1]
    ref = PackedDeserializer(StaticResolver({1: SCHEMA}), jagged="numpy").decode(big)
    for name in ("routed_experts", "input_ids"):
        a, b = moe[name], ref.fields[name]
        assert np.array_equal(a.values, b.values) and np.array_equal(a.offsets, b.offsets)
    # Decoded in place (int16 on the wire as in memory): a view of the aligned buffer, at a 64-byte boundary.
    routes = moe["routed_experts"].values
    assert not routes.flags.owndata and routes.ctypes.data % 64 == 0
    # The chunked group's commit is past its last chunk; the position too.
    assert [cm[0] for cm in client.commits] == [1, n - 1, n]
    assert c.position() == {TOPIC: {"0": n}} or c.position() == {TOPIC: {0: n}}
    c.close()


def test_the_record_carries_the_first_offset_and_next_offset():
    big = value_of(routed_group(lengths=(300, 300)))
    log = chunked(5, big, 512)
    c, _ = consumer({0: log}, committed={0: 5})
    rec = c.poll_record(0)
    assert rec is not None and rec.offset == 5 and rec.next_offset == 5 + len(log) and rec.chunks == len(log)
    d = c.decode(rec)
    assert d.offset == 5 and d.next == 5 + len(log)
    c.commit(d)
    assert FakeClient.last.commits[-1] == {0: 5 + len(log)}
    c.close()


def test_a_headless_set_under_the_log_start_is_incomplete_record_raised_or_dead_lettered():
    big = value_of(routed_group(lengths=(300, 300)))
    log = chunked(0, big, 512)[2:]  # retention took its first two chunks; reading starts at the log start
    c, client = consumer({0: log})
    rec = c.poll_record(0)
    with pytest.raises(IncompleteRecordError) as e:
        c.decode(rec)
    assert e.value.code == "incomplete_record" and e.value.details["detail"] == "headless"
    assert e.value.details["offset"] == 2
    assert client.seeks[-1] == (0, 2)  # rewound to it: not done, not committed
    with pytest.raises(IncompleteRecordError):  # and read again it is reported again, not skipped
        c.decode(c.poll_record(0))
    c.close()

    written = []
    c, client = consumer({0: log}, on_undecodable="dead-letter", dead_letter_topic="t.rollout.dead-letter")
    c._dead_letters = type("W", (), {"write": lambda self, r, err: written.append((r, err)), "close": lambda self: None})()
    got = []
    stats = feed(c, lambda *a: got.append(a), idle_timeout=0, poll_timeout=0)
    assert got == [] and stats.dead_lettered == 1
    (r, err), = written
    from rollout_stream.dead_letters import dead_letter_for
    dl = dead_letter_for(r, err)
    assert dl["reason"] == "incomplete_record" and dl["records"][0]["offset"] == 2 and dl["records"][0]["value"] is None
    assert client.commits[-1] == {0: 3}  # past the fault; its later chunks are dropped as they come
    c.close()
    # Restarted from that commit (a trusted start), the set's leftover chunks are skipped, not reported again.
    c, client = consumer({0: log}, committed={0: 3}, on_undecodable="dead-letter", dead_letter_topic="t.rollout.dead-letter")
    c._dead_letters = type("W", (), {"write": lambda self, r, err: written.append((r, err)), "close": lambda self: None})()
    stats = feed(c, lambda *a: got.append(a), idle_timeout=0, poll_timeout=0)
    assert got == [] and stats.dead_lettered == 0 and len(written) == 1
    c.close()


def test_a_committed_start_inside_a_set_skips_its_rest_silently():
    a = value_of(routed_group("a", lengths=(300, 300)))
    b = value_of(versioned_group("b", 11))
    log = chunked(0, a, 512) + [Msg(len(chunked(0, a, 512)), b, b"b")]
    c, _ = consumer({0: log}, committed={0: 3})  # a was handed on and committed past... by an older reader
    got = []
    feed(c, lambda ids, fields, tags: got.append(ids), idle_timeout=0, poll_timeout=0)
    assert len(got) == 1
    c.close()


def test_a_crc_mismatch_is_incomplete_when_verified():
    big = bytearray(value_of(routed_group(lengths=(300, 300))))
    log = chunked(0, bytes(big), 512)
    bad = bytearray(log[1].value())
    bad[-1] ^= 0xFF
    log[1] = Msg(1, bytes(bad))
    c, _ = consumer({0: log}, verify_chunk_crc=True)
    with pytest.raises(IncompleteRecordError, match="crc_mismatch"):
        c.decode(c.poll_record(0))
    c.close()


def test_a_total_size_above_max_value_bytes_is_undecodable_before_allocating():
    big = value_of(routed_group(lengths=(300, 300)))
    log = chunked(0, big, 512)
    c, _ = consumer({0: log}, max_value_bytes=len(big) - 1)
    with pytest.raises(DecodeError, match="above the ceiling"):
        c.decode(c.poll_record(0))
    c.close()


def test_rewind_seeks_to_the_first_chunk_and_the_set_comes_again():
    big = value_of(routed_group(lengths=(300, 300)))
    log = chunked(0, big, 512)
    c, client = consumer({0: log})
    calls = []

    def put(ids, fields, tags):
        calls.append(ids)
        if len(calls) == 1:
            raise RuntimeError("trainer hiccup")

    with pytest.raises(RuntimeError):
        feed(c, put, idle_timeout=0, poll_timeout=0)
    assert client.seeks[-1] == (0, 0)
    feed(c, put, idle_timeout=0, poll_timeout=0)
    assert len(calls) == 2 and client.commits[-1] == {0: len(log)}
    c.close()


def test_a_stale_set_is_skipped_from_its_first_chunk_without_a_buffer(monkeypatch):
    import rollout_stream.chunks as chunks_mod

    big = value_of(versioned_group("old", 3, lengths=(3000, 3000)))
    fresh = value_of(versioned_group("new", 11))
    log = chunked(0, big, 4096, headers=[("weight_version", b"3")])
    log.append(Msg(len(log), fresh, b"new", headers=[("weight_version", b"11")]))
    sizes = []
    real = chunks_mod.aligned_buffer
    monkeypatch.setattr(chunks_mod, "aligned_buffer", lambda n: sizes.append(n) or real(n))
    c, client = consumer({0: log})
    got = []
    stats = feed(c, lambda ids, fields, tags: got.append(ids), idle_timeout=0, poll_timeout=0,
                 current_weight_version=11, max_weight_lag=2)
    assert stats.stale_by_header == 1 and stats.groups == 1 and sizes == []
    assert client.commits[-1] == {0: len(log)}
    assert c.skip_set is None  # feed leaves no hook behind
    c.close()
