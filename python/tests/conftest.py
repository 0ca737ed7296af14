"""Shared fixtures: the packed schema, group builders, and the real broker/registry.

Integration tests use the broker and registry named by ``KAFKA_BROKERS`` and
``SCHEMA_REGISTRY_URL`` (defaults: the local ones of ``scripts/local-kafka.sh``).
When either cannot be reached, those tests FAIL with a message saying so;
they are never skipped.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from rollout_stream import DEFAULT_BROKERS, DEFAULT_REGISTRY_URL
from rollout_stream.encode import load_packed_schema, packed_schema_path

REPO_ROOT = Path(__file__).resolve().parents[2]
# The benchmarks live outside the installed package (python/bench); their tests import them from there.
sys.path.insert(0, str(REPO_ROOT / "python" / "bench"))


@pytest.fixture(scope="session")
def packed_schema() -> dict:
    return load_packed_schema()


@pytest.fixture(scope="session")
def packed_schema_text() -> str:
    return packed_schema_path().read_text()


@dataclass
class KafkaEnv:
    brokers: str
    registry_url: str

    def register(self, subject: str, schema_text: str) -> int:
        """Registers an Avro schema under ``subject`` with the registry REST API; returns its id."""
        req = urllib.request.Request(
            f"{self.registry_url.rstrip('/')}/subjects/{subject}/versions",
            data=json.dumps({"schema": schema_text, "schemaType": "AVRO"}).encode(),
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=15) as resp:
            return int(json.loads(resp.read())["id"])


def _check_broker(brokers: str) -> str | None:
    from confluent_kafka.admin import AdminClient

    try:
        AdminClient({"bootstrap.servers": brokers}).list_topics(timeout=10)
    except Exception as e:  # KafkaException on timeout
        return f"Kafka broker at {brokers} is unreachable: {e}"
    return None


def _check_registry(url: str) -> str | None:
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/subjects", timeout=10) as resp:
            resp.read()
    except (urllib.error.URLError, OSError) as e:
        return f"schema registry at {url} is unreachable: {e}"
    return None


@pytest.fixture(scope="session")
def kafka_env() -> KafkaEnv:
    """The real broker and registry; fails (never skips) when either is down."""
    env = KafkaEnv(
        brokers=os.environ.get("KAFKA_BROKERS") or DEFAULT_BROKERS,
        registry_url=os.environ.get("SCHEMA_REGISTRY_URL") or DEFAULT_REGISTRY_URL,
    )
    problems = [p for p in (_check_broker(env.brokers), _check_registry(env.registry_url)) if p]
    if problems:
        pytest.fail(
            "integration tests need a running broker and registry "
            "(start them with `./rollout-stream kafka up` or set KAFKA_BROKERS / SCHEMA_REGISTRY_URL): "
            + "; ".join(problems),
            pytrace=False,
        )
    return env


@pytest.fixture
def packed_topic(kafka_env: KafkaEnv, packed_schema_text: str):
    """A fresh single-partition topic ``pytest.<uuid>.rollout.packed`` with the schema registered.

    Yields ``(topic, schema_id)``; the topic is deleted afterwards.
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"pytest.{uuid.uuid4().hex[:12]}.rollout.packed"
    admin = AdminClient({"bootstrap.servers": kafka_env.brokers})
    for fut in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        fut.result(timeout=30)
    schema_id = kafka_env.register(f"{topic}-value", packed_schema_text)
    yield topic, schema_id
    for fut in admin.delete_topics([topic]).values():
        try:
            fut.result(timeout=30)
        except Exception:
            pass


@pytest.fixture
def packed_topics(kafka_env: KafkaEnv, packed_schema_text: str):
    """Factory ``make(partitions=1, suffix="rollout.packed") -> (topic, schema_id)``: fresh topics, deleted afterwards."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_env.brokers})
    made: list[str] = []

    def make(partitions: int = 1, suffix: str = "rollout.packed") -> tuple[str, int]:
        topic = f"pytest.{uuid.uuid4().hex[:12]}.{suffix}"
        for fut in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
            fut.result(timeout=30)
        made.append(topic)
        return topic, kafka_env.register(f"{topic}-value", packed_schema_text)

    yield make
    if made:
        for fut in admin.delete_topics(made).values():
            try:
                fut.result(timeout=30)
            except Exception:
                pass


@pytest.fixture(scope="session")
def gym(tmp_path_factory):
    """NeMo-Gym's servers in front of the toy policy: (head server URL, the policy's record file, NeMo-Gym's python)."""
    from gym_env import start_gym

    yield from start_gym(tmp_path_factory)

