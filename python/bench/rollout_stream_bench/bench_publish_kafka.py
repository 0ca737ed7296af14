"""What ``bench publish`` needs from the broker and registry, behind one small class (faked in the unit tests)."""

from __future__ import annotations

import sys
import time
from typing import Any

from rollout_stream.errors import BrokerUnavailableError, KafkaOperationError


class Capture:
    """An in-memory producer: records what the publisher would send (``keep=False``: only counts bytes).

    Not keeping the values matters for timing: a kept value is fresh memory
    each time, and its page faults (~3 µs per 4 KiB here) are not what a
    producer that hands values to librdkafka and drops them pays.
    """

    def __init__(self, partitions: int, keep: bool = True) -> None:
        self.partitions = partitions
        self.keep = keep
        self.records: list[tuple[bytes, bytes, int]] = []
        self.nbytes = 0

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        from types import SimpleNamespace

        parts = {i: SimpleNamespace(id=i) for i in range(self.partitions)}
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions=parts)})

    def produce(self, topic: str, value: bytes, key: bytes, partition: int, on_delivery: Any = None) -> None:
        self.nbytes += len(value)
        if self.keep:
            self.records.append((key, value, partition))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = -1) -> int:
        return 0


class Kafka:
    """What the bench needs from the broker and registry (a fake stands in for it in the unit tests)."""

    def __init__(self, brokers: str, registry_url: str, timeout: float = 10.0) -> None:
        self.brokers, self.registry_url, self.timeout = brokers, registry_url, timeout
        self._admin: Any = None

    def admin(self) -> Any:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            from rollout_stream import kafka_env

            self._admin = AdminClient(kafka_env.client_config(self.brokers))
        return self._admin

    def check(self) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        from rollout_stream import kafka_env

        try:  # a client of its own with librdkafka's connect-failure log lines off: the error below says it
            AdminClient(kafka_env.client_config(self.brokers, {"log_level": 0})).list_topics(timeout=self.timeout)
        except KafkaException as e:
            raise BrokerUnavailableError(
                f"no Kafka broker answered at {self.brokers} within {self.timeout} s ({e.args[0] if e.args else e}); "
                "start the local one with `./rollout-stream kafka up` or pass --brokers",
                cause=e,
            ) from e

    def create_topic(self, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import NewTopic

        for fut in self.admin().create_topics([NewTopic(topic, partitions, 1)]).values():
            try:
                fut.result(timeout=30)
            except Exception as e:
                raise KafkaOperationError(f"could not create the scratch topic {topic} at {self.brokers}: {e}", topic=topic) from e
        # A new topic reaches the broker's metadata a moment later; the publisher reads it at start-up.
        deadline = time.monotonic() + 30
        while True:
            t = self.admin().list_topics(topic, timeout=self.timeout).topics.get(topic)
            if t is not None and t.error is None and len(t.partitions) == partitions:
                return
            if time.monotonic() > deadline:
                raise KafkaOperationError(f"the scratch topic {topic} did not show up in the metadata of {self.brokers}", topic=topic)
            time.sleep(0.1)

    def delete_topic(self, topic: str) -> None:
        for fut in self.admin().delete_topics([topic]).values():
            try:
                fut.result(timeout=30)
            except Exception as e:  # best effort: say so, do not hide the bench's own outcome
                print(f"warning: could not delete the scratch topic {topic}: {e}", file=sys.stderr)

    def delete_subject(self, subject: str) -> None:
        from rollout_stream.registry import make_registry_client

        try:
            client = make_registry_client(self.registry_url)
            client.delete_subject(subject)
            client.delete_subject(subject, permanent=True)
        except Exception as e:  # Apicurio may not know permanent deletes; the scratch subject is harmless
            print(f"note: registry subject {subject} not fully deleted: {e}", file=sys.stderr)

    def raw_producer(self, conf: dict[str, Any]) -> Any:
        from confluent_kafka import Producer

        return Producer(conf)

    def publisher(self, topic: str, producer_config: dict[str, Any]) -> Any:
        from rollout_stream.publisher import RolloutPublisher

        return RolloutPublisher(
            topic, topic_prefix="", brokers=self.brokers, registry_url=self.registry_url,
            producer_config=producer_config, connect_timeout=self.timeout,
        )
