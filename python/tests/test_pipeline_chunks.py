"""The TypeScript pipeline accumulates a row the Python publisher sent as a chunk set (integration).

``./rollout-stream run`` on a fresh prefix whose ``rollout.row-completed`` is
set to ``max.message.bytes`` = 1 MiB: the Python publisher discovers that
limit and sends a ~12 MB router-replay row as one chunk set; accumulate's
chunk-reassembling source hands it on whole, pack writes the group (the
other topics keep the 64 MiB default), and the trainer's PackedConsumer gets
the routes back equal to what was published.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from chunk_topics import MIB, set_record_limit
from test_publisher_chunks_kafka import TOKENS, big_row
from test_publisher_pipeline import running_pipeline

from rollout_stream import PackedConsumer, RolloutPublisher

pytestmark = pytest.mark.integration


def test_the_pipeline_accumulates_and_packs_a_12_mb_row_the_python_publisher_chunked(kafka_env, tmp_path):
    with running_pipeline(kafka_env, tmp_path, "pychunk") as (env, prefix, _config):
        topic = f"{prefix}rollout.row-completed"
        set_record_limit(kafka_env.brokers, topic, MIB)
        row = big_row("g-moe") | {"batch_id": "b-chunk"}
        with RolloutPublisher(brokers=kafka_env.brokers, registry_url=kafka_env.registry_url, topic_prefix=prefix) as pub:
            assert pub.record_limit == MIB
            pub.publish_row(row)
            pub.end_batch("b-chunk", 1)
            assert pub.stats.chunk_sets == 1
        got = []
        with PackedConsumer(f"{prefix}rollout.packed", f"pytest-{uuid.uuid4().hex[:8]}", kafka_env.brokers,
                            kafka_env.registry_url, jagged="numpy", instance_id=False) as c:
            for _ in range(180):
                d = c.poll(1.0)
                if d is not None:
                    got.append(d)
                    break
        assert got, "no packed group within 180 s (see the run log above)"
        group = got[0].group
        assert group.group_id == "g-moe" and len(group.sample_ids) == 1
        routes = group.fields["routed_experts"]
        want = row["message_log"][1]["routed_experts"]
        assert np.array_equal(np.asarray(routes.values).reshape(-1)[-want.size:], want.reshape(-1)), \
            "the routes the trainer got differ from the published ones"
        assert TOKENS * 24 * 8 * 2 > 12 * 10**6
