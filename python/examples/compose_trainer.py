"""The trainer of docker-compose.yml: a PackedConsumer on ``rollout.packed``.

A stand-in for a real trainer's ``put_samples`` (NeMo-RL's transfer-queue
write): it "trains" on each group by printing one JSON line,
``{"trained": <group_id>, "rows": <n>}``, and its offset is
committed after that returned (``feed``'s default). The connection comes from
the environment, as for every client of the package (``KAFKA_BROKERS``,
``SCHEMA_REGISTRY_URL``, ``TOPIC_PREFIX``, SASL/TLS; python/README.md).

``TRAINER_GROUP`` (default ``trainer``) is the consumer group;
``TRAINER_STOP_AFTER=n`` exits after n groups (default 0: run until stopped).
It prints ``{"summary": {"groups": n}}`` when it stops (SIGTERM included).

It first waits (up to ``TRAINER_WAIT_S``, 300 s) for the topic to exist:
a consumer subscribed to a topic not yet created would only see it at its
next metadata refresh (minutes), and podman-compose 1.0 starts the trainer
without waiting for ``topics create``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException

from rollout_stream import PackedConsumer, feed, kafka_env


def wait_for_topic(topic: str, seconds: float) -> None:
    probe = Consumer({**kafka_env.client_config(), "group.id": "compose-trainer-probe"})
    try:
        deadline = time.monotonic() + seconds
        while True:
            try:
                found = probe.list_topics(topic, timeout=5).topics.get(topic)
                if found is not None and found.error is None and found.partitions:
                    return
            except KafkaException:
                pass  # no broker yet
            if time.monotonic() > deadline:
                raise SystemExit(f"topic {topic} not there after {seconds:g} s")
            time.sleep(1)
    finally:
        probe.close()


def main() -> int:
    topic = kafka_env.topic("rollout.packed")
    group = os.environ.get("TRAINER_GROUP") or "trainer"
    stop_after = int(os.environ.get("TRAINER_STOP_AFTER") or 0)
    trained = 0
    stopping = False

    def on_term(_signum, _frame) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)

    def put_samples(sample_ids, fields, tags) -> None:
        nonlocal trained
        trained += 1
        print(json.dumps({"trained": tags[0]["group_id"], "rows": len(sample_ids)}), flush=True)

    print(json.dumps({"trainer": {"topic": topic, "group": group, "brokers": kafka_env.brokers()}}), flush=True)
    wait_for_topic(topic, float(os.environ.get("TRAINER_WAIT_S") or 300))
    with PackedConsumer(topic, group) as consumer:
        while not stopping and not (stop_after and trained >= stop_after):
            feed(consumer, put_samples, stop_after=(stop_after - trained) if stop_after else None, idle_timeout=1.0)
    print(json.dumps({"summary": {"groups": trained}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
