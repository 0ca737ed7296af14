"""SASL and TLS from the environment alone reach the real broker (the Python side of
test/integration/security.test.ts).

``scripts/local-kafka.sh`` opens a SASL_PLAINTEXT listener two ports above the plain one
(user ``rstest``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and an SSL listener three above,
with a certificate of a local CA in ``.local/kafka/tls``. Each test sets only the
environment variables, then lets ``RolloutPublisher`` register, publish and flush, and a
client from :func:`rollout_stream.kafka_env.client_config` read the record back. The
three-broker cluster has no such listeners: there these tests are skipped, as the
TypeScript suite leaves security.test.ts out.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from rollout_stream import BrokerUnavailableError, RolloutPublisher, kafka_env, row_json

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.environ.get("RS_BROKERS", "1") == "3", reason="the SASL/TLS listeners exist on the single local broker only"),
]

SASL_USER, SASL_PASSWORD = "rstest", "rstest-secret"
ENV_NAMES = ("KAFKA_BROKERS", "TOPIC_PREFIX", "KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD",
             "KAFKA_TLS", "KAFKA_TLS_CA_FILE", "KAFKA_TLS_CERT_FILE", "KAFKA_TLS_KEY_FILE", "KAFKA_TLS_REJECT_UNAUTHORIZED")


def _port(kafka_env_fixture, offset: int, override: str) -> str:
    plain = kafka_env_fixture.brokers.split(",")[0]
    return f"127.0.0.1:{os.environ.get(override) or int(plain.rsplit(':', 1)[1]) + offset}"


def _tls_dir() -> Path:
    return Path(os.environ.get("RS_KAFKA_STATE_DIR") or REPO_ROOT / ".local" / "kafka") / "tls"


@pytest.fixture
def secured(kafka_env, monkeypatch):
    """``use(**variables)``: a clean environment with these set and a fresh prefix whose
    row-completed topic exists (made over the secured listener); the topics are deleted afterwards."""
    from confluent_kafka.admin import AdminClient, NewTopic

    made: list[str] = []

    def use(**variables: str) -> str:
        for name in ENV_NAMES:
            monkeypatch.delenv(name, raising=False)
        prefix = f"pytest-sec.{uuid.uuid4().hex[:10]}."
        for name, value in {**variables, "TOPIC_PREFIX": prefix, "SCHEMA_REGISTRY_URL": kafka_env.registry_url}.items():
            monkeypatch.setenv(name, value)
        topic = f"{prefix}rollout.row-completed"
        admin = AdminClient(kafka_env_client_config())
        for fut in admin.create_topics([NewTopic(topic, 2, 1)]).values():
            fut.result(timeout=30)
        made.append(topic)
        deadline = time.monotonic() + 30  # a new topic reaches the metadata a moment later
        while (t := admin.list_topics(topic, timeout=10).topics.get(topic)) is None or t.error is not None:
            assert time.monotonic() < deadline, f"{topic} did not show up in the metadata"
            time.sleep(0.1)
        return topic

    yield use
    if made:
        admin = AdminClient({"bootstrap.servers": kafka_env.brokers})
        for fut in admin.delete_topics(made).values():
            try:
                fut.result(timeout=30)
            except Exception:
                pass


def kafka_env_client_config(extra: dict | None = None) -> dict:
    return kafka_env.client_config(None, extra)


def _publish_and_read_back(topic: str) -> dict:
    group_id = f"sec-{uuid.uuid4().hex[:8]}"
    gym_row = {"responses_create_params": {"input": "q"}, "agent_ref": {"name": "sec"}}
    gym_result = {"response": {"output": [{"type": "message", "generation_token_ids": [7, 8]}]}, "reward": 1.0}
    with RolloutPublisher(connect_timeout=10) as pub:
        assert pub.topic == topic
        partition = pub.publish_result(gym_row, gym_result, batch_id="sec-b1", group_id=group_id, group_index=0,
                                       row_index=0, num_generations=1, prompt_idx=0, weight_version=0)
        pub.flush()
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(kafka_env_client_config({"group.id": f"{group_id}-read", "isolation.level": "read_committed",
                                          "enable.auto.commit": False}))
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None and m.key() == group_id.encode():
                kind, _, record = row_json.decode(m.value())
                assert kind == "gym_result"
                return record
    finally:
        c.close()
    raise AssertionError(f"{group_id} did not come back from {topic}")


@pytest.mark.parametrize("mechanism", ["PLAIN", "scram-sha-256", "SCRAM-SHA-512"])
def test_sasl_from_the_environment_authenticates_and_a_record_goes_through(kafka_env, secured, mechanism):
    topic = secured(KAFKA_BROKERS=_port(kafka_env, 2, "RS_KAFKA_SASL_PORT"), KAFKA_SASL_MECHANISM=mechanism,
                    KAFKA_SASL_USERNAME=SASL_USER, KAFKA_SASL_PASSWORD=SASL_PASSWORD)
    assert _publish_and_read_back(topic)["batch_id"] == "sec-b1"


def test_a_wrong_sasl_password_is_refused(kafka_env, monkeypatch):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KAFKA_BROKERS", _port(kafka_env, 2, "RS_KAFKA_SASL_PORT"))
    monkeypatch.setenv("KAFKA_SASL_MECHANISM", "SCRAM-SHA-256")
    monkeypatch.setenv("KAFKA_SASL_USERNAME", SASL_USER)
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "wrong")
    with pytest.raises(BrokerUnavailableError, match="no Kafka broker answered"):
        RolloutPublisher(connect_timeout=3)


def test_tls_trusting_the_local_ca_from_the_environment_connects_and_a_record_goes_through(kafka_env, secured):
    tls = _tls_dir()
    # The listener does not ask for a client certificate; giving one checks that librdkafka takes the pair.
    topic = secured(KAFKA_BROKERS=_port(kafka_env, 3, "RS_KAFKA_TLS_PORT"), KAFKA_TLS="true",
                    KAFKA_TLS_CA_FILE=str(tls / "ca.pem"), KAFKA_TLS_CERT_FILE=str(tls / "server.crt"),
                    KAFKA_TLS_KEY_FILE=str(tls / "server.key"))
    assert _publish_and_read_back(topic)["batch_id"] == "sec-b1"


def test_tls_without_the_ca_is_refused_unless_verification_is_off(kafka_env, secured, monkeypatch):
    tls_broker = _port(kafka_env, 3, "RS_KAFKA_TLS_PORT")
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KAFKA_BROKERS", tls_broker)
    monkeypatch.setenv("KAFKA_TLS", "true")
    with pytest.raises(BrokerUnavailableError):
        RolloutPublisher(connect_timeout=3)
    topic = secured(KAFKA_BROKERS=tls_broker, KAFKA_TLS="1", KAFKA_TLS_REJECT_UNAUTHORIZED="false")
    assert _publish_and_read_back(topic)["batch_id"] == "sec-b1"
