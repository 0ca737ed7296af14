"""The environment → librdkafka mapping (rollout_stream.kafka_env) and the clients that use it.

No broker: the variables are given as a dict, and the clients' librdkafka
classes are replaced by recorders of the config they were built with.
"""

from __future__ import annotations

from typing import Any

import pytest

from rollout_stream import kafka_env
from rollout_stream.errors import ConfigError, RolloutStreamError

SECURITY_VARS = (
    "KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD", "KAFKA_TLS", "KAFKA_TLS_CA_FILE",
    "KAFKA_TLS_CERT_FILE", "KAFKA_TLS_KEY_FILE", "KAFKA_TLS_REJECT_UNAUTHORIZED",
    "SCHEMA_REGISTRY_USERNAME", "SCHEMA_REGISTRY_PASSWORD",
)


@pytest.fixture
def pem(tmp_path):
    """Three PEM-named files (their contents do not matter to the mapping)."""
    paths = {}
    for name in ("ca", "cert", "key"):
        p = tmp_path / f"{name}.pem"
        p.write_text("-----BEGIN-----\n")
        paths[name] = str(p)
    return paths


def test_no_variables_mean_plaintext_and_the_local_defaults():
    assert kafka_env.security_config({}) == {}
    assert kafka_env.client_config(None, None, {}) == {"bootstrap.servers": "127.0.0.1:9092"}
    assert kafka_env.registry_url(None, {}) == "http://127.0.0.1:8081/apis/ccompat/v7"
    assert kafka_env.topic_prefix(None, {}) == ""
    assert kafka_env.registry_config({}) == {}


def test_kafka_brokers_become_bootstrap_servers_with_spaces_trimmed():
    assert kafka_env.brokers(None, {"KAFKA_BROKERS": " a:1, b:2 ,"}) == "a:1,b:2"
    assert kafka_env.client_config(None, None, {"KAFKA_BROKERS": "a:1"})["bootstrap.servers"] == "a:1"


def test_schema_registry_url_and_topic_prefix_come_from_their_variables():
    env = {"SCHEMA_REGISTRY_URL": "http://r:1/apis/ccompat/v7", "TOPIC_PREFIX": "it.x."}
    assert kafka_env.registry_url(None, env) == "http://r:1/apis/ccompat/v7"
    assert kafka_env.topic("rollout.packed", None, env) == "it.x.rollout.packed"


def test_explicit_arguments_win_over_the_environment():
    env = {"KAFKA_BROKERS": "env:1", "SCHEMA_REGISTRY_URL": "http://env", "TOPIC_PREFIX": "env."}
    assert kafka_env.brokers("arg:1", env) == "arg:1"
    assert kafka_env.registry_url("http://arg", env) == "http://arg"
    assert kafka_env.topic_prefix("", env) == ""  # an explicit empty prefix is a choice, not a gap


@pytest.mark.parametrize(
    "given, librdkafka",
    [("PLAIN", "PLAIN"), ("plain", "PLAIN"), ("scram-sha-256", "SCRAM-SHA-256"), ("SCRAM-SHA-512", "SCRAM-SHA-512")],
)
def test_kafka_sasl_mechanism_becomes_sasl_mechanism_in_librdkafka_spelling(given, librdkafka):
    env = {"KAFKA_SASL_MECHANISM": given, "KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "p"}
    assert kafka_env.security_config(env) == {
        "sasl.mechanism": librdkafka,
        "sasl.username": "u",
        "sasl.password": "p",
        "security.protocol": "SASL_PLAINTEXT",
    }


def test_sasl_credentials_default_to_empty_as_on_the_typescript_side():
    conf = kafka_env.security_config({"KAFKA_SASL_MECHANISM": "plain"})
    assert conf["sasl.username"] == "" and conf["sasl.password"] == ""


def test_sasl_credentials_without_a_mechanism_change_nothing():
    assert kafka_env.security_config({"KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "p"}) == {}


def test_spaces_around_the_mechanism_are_trimmed():
    assert kafka_env.security_config({"KAFKA_SASL_MECHANISM": " plain "})["sasl.mechanism"] == "PLAIN"


@pytest.mark.parametrize("bad", ["GSSAPI", "OAUTHBEARER", "scram", "scram-sha-1"])
def test_a_bad_kafka_sasl_mechanism_is_refused_naming_the_variable(bad):
    with pytest.raises(ConfigError) as err:
        kafka_env.security_config({"KAFKA_SASL_MECHANISM": bad})
    assert err.value.variable == "KAFKA_SASL_MECHANISM" and err.value.code == "config"
    assert str(err.value).startswith("KAFKA_SASL_MECHANISM must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")
    assert repr(bad) in str(err.value)
    assert isinstance(err.value, ValueError) and isinstance(err.value, RolloutStreamError)


@pytest.mark.parametrize("on", ["true", "1", "TRUE"])
def test_kafka_tls_alone_means_ssl_with_verification_on(on):
    assert kafka_env.security_config({"KAFKA_TLS": on}) == {"security.protocol": "SSL"}


@pytest.mark.parametrize("off", ["false", "0", ""])
def test_kafka_tls_off_means_no_tls(off):
    assert kafka_env.security_config({"KAFKA_TLS": off}) == {}


def test_kafka_tls_ca_file_becomes_ssl_ca_location_and_turns_tls_on(pem):
    assert kafka_env.security_config({"KAFKA_TLS_CA_FILE": pem["ca"]}) == {
        "ssl.ca.location": pem["ca"],
        "security.protocol": "SSL",
    }


def test_client_certificate_and_key_become_ssl_certificate_and_key_location(pem):
    env = {"KAFKA_TLS": "true", "KAFKA_TLS_CERT_FILE": pem["cert"], "KAFKA_TLS_KEY_FILE": pem["key"]}
    conf = kafka_env.security_config(env)
    assert conf["ssl.certificate.location"] == pem["cert"] and conf["ssl.key.location"] == pem["key"]


def test_tls_files_without_tls_on_are_ignored_as_on_the_typescript_side(pem):
    assert kafka_env.security_config({"KAFKA_TLS_CERT_FILE": pem["cert"], "KAFKA_TLS_KEY_FILE": pem["key"]}) == {}


def test_reject_unauthorized_false_turns_certificate_verification_off():
    conf = kafka_env.security_config({"KAFKA_TLS": "true", "KAFKA_TLS_REJECT_UNAUTHORIZED": "false"})
    assert conf["enable.ssl.certificate.verification"] is False
    assert conf["ssl.endpoint.identification.algorithm"] == "none"
    on = kafka_env.security_config({"KAFKA_TLS": "true", "KAFKA_TLS_REJECT_UNAUTHORIZED": "true"})
    assert "enable.ssl.certificate.verification" not in on


def test_sasl_and_tls_together_mean_sasl_ssl(pem):
    env = {"KAFKA_SASL_MECHANISM": "scram-sha-256", "KAFKA_TLS_CA_FILE": pem["ca"]}
    assert kafka_env.security_config(env)["security.protocol"] == "SASL_SSL"


@pytest.mark.parametrize("name", ["KAFKA_TLS", "KAFKA_TLS_REJECT_UNAUTHORIZED"])
def test_a_switch_that_is_neither_true_nor_false_is_refused_naming_the_variable(name):
    with pytest.raises(ConfigError, match=rf"^{name} must be true or false") as err:
        kafka_env.security_config({"KAFKA_TLS": "true", name: "yes"})
    assert err.value.variable == name


@pytest.mark.parametrize("name", ["KAFKA_TLS_CA_FILE", "KAFKA_TLS_CERT_FILE", "KAFKA_TLS_KEY_FILE"])
def test_a_tls_file_that_does_not_exist_is_refused_naming_the_variable(name, pem, tmp_path):
    env = {"KAFKA_TLS": "true", "KAFKA_TLS_CERT_FILE": pem["cert"], "KAFKA_TLS_KEY_FILE": pem["key"]}
    env[name] = str(tmp_path / "missing.pem")
    with pytest.raises(ConfigError, match=rf"^{name} names .*missing.pem.*not a file") as err:
        kafka_env.security_config(env)
    assert err.value.variable == name


def test_a_client_certificate_without_its_key_is_refused(pem):
    with pytest.raises(ConfigError, match="^KAFKA_TLS_KEY_FILE is not set but KAFKA_TLS_CERT_FILE is"):
        kafka_env.security_config({"KAFKA_TLS": "true", "KAFKA_TLS_CERT_FILE": pem["cert"]})
    with pytest.raises(ConfigError, match="^KAFKA_TLS_CERT_FILE is not set but KAFKA_TLS_KEY_FILE is"):
        kafka_env.security_config({"KAFKA_TLS": "true", "KAFKA_TLS_KEY_FILE": pem["key"]})


def test_explicit_config_wins_over_the_environment_key_by_key():
    env = {"KAFKA_BROKERS": "env:1", "KAFKA_SASL_MECHANISM": "plain", "KAFKA_SASL_USERNAME": "env-user"}
    conf = kafka_env.client_config("arg:1", {"sasl.username": "arg-user", "client.id": "c"}, env)
    assert conf == {
        "bootstrap.servers": "arg:1",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "arg-user",
        "sasl.password": "",
        "security.protocol": "SASL_PLAINTEXT",
        "client.id": "c",
    }


def test_registry_credentials_become_basic_auth_user_info():
    env = {"SCHEMA_REGISTRY_USERNAME": "u", "SCHEMA_REGISTRY_PASSWORD": "p:w"}
    assert kafka_env.registry_config(env) == {"basic.auth.user.info": "u:p:w"}


# --- every class that builds a librdkafka client uses the mapping ------------------------------


class Recorder:
    """Stands in for a confluent-kafka client class: keeps the config, fails the first network call."""

    configs: list[dict[str, Any]] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        Recorder.configs.append(dict(conf))

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no network in this test ({name})")


@pytest.fixture
def sasl_env(monkeypatch, pem):
    for name in SECURITY_VARS + ("KAFKA_BROKERS", "SCHEMA_REGISTRY_URL", "TOPIC_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KAFKA_BROKERS", "env-broker:9094")
    monkeypatch.setenv("KAFKA_SASL_MECHANISM", "scram-sha-512")
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "rstest")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "secret")
    monkeypatch.setenv("KAFKA_TLS_CA_FILE", pem["ca"])
    Recorder.configs = []
    return pem


def _assert_from_env(conf: dict[str, Any], pem: dict[str, str]) -> None:
    assert conf["bootstrap.servers"] == "env-broker:9094"
    assert conf["security.protocol"] == "SASL_SSL"
    assert conf["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (conf["sasl.username"], conf["sasl.password"]) == ("rstest", "secret")
    assert conf["ssl.ca.location"] == pem["ca"]


def test_the_publisher_producer_takes_brokers_and_sasl_tls_from_the_environment(sasl_env):
    from rollout_stream.publisher import producer_settings

    conf = producer_settings(None, {"client.id": "x"})
    _assert_from_env(conf, sasl_env)
    assert conf["enable.idempotence"] is True and conf["client.id"] == "x"


def test_the_publisher_takes_topic_prefix_and_registry_from_the_environment(sasl_env, monkeypatch):
    import rollout_stream.publisher as publisher
    from fake_producer import FakeProducer

    monkeypatch.setenv("TOPIC_PREFIX", "it.env.")
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", "http://env-registry:1/apis/ccompat/v7")
    fake = FakeProducer(topics={"it.env.rollout.row-completed"})
    p = publisher.RolloutPublisher(producer=fake, schema_id=1)
    assert p.topic == "it.env.rollout.row-completed"
    assert p.brokers == "env-broker:9094" and p.registry_url == "http://env-registry:1/apis/ccompat/v7"


def test_the_packed_consumer_takes_brokers_and_sasl_tls_from_the_environment(sasl_env, monkeypatch):
    import rollout_stream.consumer as consumer_mod
    from rollout_stream.registry import StaticResolver
    from rollout_stream.deserializer import PackedDeserializer

    monkeypatch.setattr(consumer_mod, "Consumer", Recorder)
    monkeypatch.setattr(consumer_mod.PackedConsumer, "_client_class", Recorder, raising=False)
    with pytest.raises(RuntimeError, match="no network"):
        consumer_mod.PackedConsumer("t", "g", deserializer=PackedDeserializer(StaticResolver({})), check=False)
    _assert_from_env(Recorder.configs[-1], sasl_env)
    assert Recorder.configs[-1]["isolation.level"] == "read_committed"


def test_the_dead_letter_writer_takes_brokers_and_sasl_tls_from_the_environment(sasl_env, monkeypatch):
    import confluent_kafka

    from rollout_stream.dead_letters import DeadLetterWriter

    monkeypatch.setattr(confluent_kafka, "Producer", Recorder)
    DeadLetterWriter("dl", None, registry_client=None)
    _assert_from_env(Recorder.configs[-1], sasl_env)
    DeadLetterWriter("dl", "arg:1", registry_client=None, config={"sasl.password": "explicit"})
    assert Recorder.configs[-1]["bootstrap.servers"] == "arg:1" and Recorder.configs[-1]["sasl.password"] == "explicit"


def test_the_replay_reader_takes_brokers_and_sasl_tls_from_the_environment(sasl_env, monkeypatch):
    import rollout_stream.replay_reader as replay_reader

    monkeypatch.setattr(replay_reader, "Consumer", Recorder)
    with pytest.raises(RuntimeError, match="no network"):
        list(replay_reader.replay_records("t", deserializer=object()))
    _assert_from_env(Recorder.configs[-1], sasl_env)


def test_the_registry_client_takes_basic_auth_from_the_environment(monkeypatch):
    from rollout_stream.registry import make_registry_client

    monkeypatch.setenv("SCHEMA_REGISTRY_USERNAME", "reg-user")
    monkeypatch.setenv("SCHEMA_REGISTRY_PASSWORD", "reg-pass")
    client = make_registry_client("http://127.0.0.1:1")
    auth = client._rest_client.auth  # confluent-kafka keeps (user, password) there
    assert tuple(auth) == ("reg-user", "reg-pass")
    explicit = make_registry_client("http://127.0.0.1:1", {"basic.auth.user.info": "arg:pw"})
    assert tuple(explicit._rest_client.auth) == ("arg", "pw")


def test_a_bad_mechanism_stops_the_publisher_before_it_connects(monkeypatch):
    from rollout_stream.publisher import producer_settings

    monkeypatch.setenv("KAFKA_SASL_MECHANISM", "kerberos")
    with pytest.raises(ConfigError, match="^KAFKA_SASL_MECHANISM"):
        producer_settings(None)


@pytest.mark.parametrize("command", ["replay", "inspect"])
def test_the_cli_defaults_follow_the_environment(monkeypatch, command):
    from rollout_stream import cli

    monkeypatch.setenv("KAFKA_BROKERS", "cli-env:1")
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", "http://cli-env-registry")
    monkeypatch.setenv("TOPIC_PREFIX", "p.")
    seen: dict[str, Any] = {}
    monkeypatch.setattr(cli, f"{command}_cmd" if command == "replay" else command, lambda args: seen.update(vars(args)) or 0)
    assert cli.main([command, "--all"] if command == "replay" else [command]) == 0
    assert (seen["brokers"], seen["registry"], seen["topic"]) == ("cli-env:1", "http://cli-env-registry", "p.rollout.packed")
