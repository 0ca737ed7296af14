"""SPEC §6.2 on the real broker: stale groups skipped (from headers, or after decoding without them), counted, done."""

from __future__ import annotations

import uuid

import pytest

from builders import versioned_group
from kafka_helpers import committed_offsets, end_offsets, headers_for, packed_value, produce
from rollout_stream import PackedConsumer, feed

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("with_headers", [True, False], ids=["headers", "no-headers"])
def test_versions_0_to_9_with_current_9_and_lag_2_deliver_exactly_7_to_9(kafka_env, packed_topics, packed_schema, with_headers):
    topic, schema_id = packed_topics(partitions=2)
    order = [4, 9, 0, 7, 2, 8, 5, 1, 6, 3]  # fresh ones amid stale ones; each partition ends with a stale one
    recs = [versioned_group(f"v{v}", v, batch_id=f"step-{v}") for v in order]
    produce(kafka_env.brokers, topic,
            [(r["group_id"], packed_value(schema_id, packed_schema, r), headers_for(r) if with_headers else None, n % 2)
             for n, r in enumerate(recs)])
    group_id = f"pytest-{uuid.uuid4().hex[:8]}"
    delivered, stale = [], []
    with PackedConsumer(topic, group_id, kafka_env.brokers, kafka_env.registry_url, jagged="numpy") as c:
        stats = feed(c, lambda s, f, t: delivered.append(t), poll_timeout=0.5, idle_timeout=5,
                     current_weight_version=9, max_weight_lag=2, on_stale=stale.append)
        position = c.position()
    assert sorted(t[0]["weight_version"] for t in delivered) == [7, 8, 9]  # each exactly once
    assert all(row["weight_lag"] == 9 - row["weight_version"] for t in delivered for row in t)
    assert stats.stale == {lag: 1 for lag in range(3, 10)} and stats.lags == {0: 1, 1: 1, 2: 1}
    assert sorted((s.weight_version, s.lag, s.batch_id) for s in stale) == [(v, 9 - v, f"step-{v}") for v in range(7)]
    assert all(s.decoded is (not with_headers) for s in stale)
    assert stats.stale_by_header == (7 if with_headers else 0)
    ends = end_offsets(kafka_env.brokers, topic, 2)
    assert ends == {(topic, 0): 5, (topic, 1): 5}
    assert stats.done == ends == committed_offsets(kafka_env.brokers, group_id, topic, 2)
    assert position == {topic: {"0": 5, "1": 5}}
