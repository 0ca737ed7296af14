"""Where and how this package's Kafka clients connect, read from the environment in one place.

Every class that builds a librdkafka client (``RolloutPublisher``,
``PackedConsumer``, the dead-letter writer, ``replay_records``, the CLI)
takes its connection settings from here, and the schema registry client
its credentials. The names are the ones the TypeScript stages read
(``config/load.ts``), so one environment configures both sides:

- ``KAFKA_BROKERS``: ``bootstrap.servers`` (default ``127.0.0.1:9092``)
- ``SCHEMA_REGISTRY_URL``: the registry URL (default Apicurio's local ccompat v7)
- ``TOPIC_PREFIX``: put in front of the publisher's topic and the CLI's default topics
- ``KAFKA_SASL_MECHANISM``: ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; any case)
- ``KAFKA_SASL_USERNAME``, ``KAFKA_SASL_PASSWORD``: ``sasl.username``, ``sasl.password``
- ``KAFKA_TLS`` (``true``/``1``): TLS on
- ``KAFKA_TLS_CA_FILE``: ``ssl.ca.location`` (and TLS on)
- ``KAFKA_TLS_CERT_FILE``, ``KAFKA_TLS_KEY_FILE``: ``ssl.certificate.location``, ``ssl.key.location``
- ``KAFKA_TLS_REJECT_UNAUTHORIZED=false``: ``enable.ssl.certificate.verification=false``
  (and no host name check)
- ``SCHEMA_REGISTRY_USERNAME``, ``SCHEMA_REGISTRY_PASSWORD``: the registry's ``basic.auth.user.info``

``security.protocol`` follows from the two switches: SASL and TLS →
``SASL_SSL``, SASL alone → ``SASL_PLAINTEXT``, TLS alone → ``SSL``,
neither → not set (librdkafka's plaintext). An explicit argument
(``brokers=``, ``registry_url=``, ``topic_prefix=``) or ``config`` key wins
over the environment, key by key; the environment wins over the defaults.

This module imports nothing outside the standard library, so the CLI can
use it where confluent-kafka is not installed.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from .errors import ConfigError

DEFAULT_BROKERS = "127.0.0.1:9092"
DEFAULT_REGISTRY_URL = "http://127.0.0.1:8081/apis/ccompat/v7"

# What config/load.ts accepts (lower-cased there), as librdkafka spells it.
SASL_MECHANISMS = {"plain": "PLAIN", "scram-sha-256": "SCRAM-SHA-256", "scram-sha-512": "SCRAM-SHA-512"}

Env = Mapping[str, str]


def _environ(env: Env | None) -> Env:
    return os.environ if env is None else env


def brokers(explicit: str | None = None, env: Env | None = None) -> str:
    """Bootstrap servers: ``explicit``, else ``$KAFKA_BROKERS`` (comma-separated, spaces trimmed), else the default."""
    if explicit:
        return explicit
    raw = _environ(env).get("KAFKA_BROKERS") or ""
    listed = ",".join(part.strip() for part in raw.split(",") if part.strip())
    return listed or DEFAULT_BROKERS


def registry_url(explicit: str | None = None, env: Env | None = None) -> str:
    """Schema registry URL: ``explicit``, else ``$SCHEMA_REGISTRY_URL``, else the default."""
    return explicit or _environ(env).get("SCHEMA_REGISTRY_URL") or DEFAULT_REGISTRY_URL


def topic_prefix(explicit: str | None = None, env: Env | None = None) -> str:
    """Topic prefix: ``explicit`` (``""`` included), else ``$TOPIC_PREFIX``, else none."""
    if explicit is not None:
        return explicit
    return _environ(env).get("TOPIC_PREFIX", "")


def topic(base: str, prefix: str | None = None, env: Env | None = None) -> str:
    """``base`` (e.g. ``"rollout.packed"``) with the topic prefix in front."""
    return f"{topic_prefix(prefix, env)}{base}"


def _flag(env: Env, name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in ("1", "true"):
        return True
    if value in ("0", "false"):
        return False
    raise ConfigError(name, f"must be true or false (or 1/0), not {raw!r}")


def _file(env: Env, name: str) -> str | None:
    path = env.get(name) or None
    if path is not None and not os.path.isfile(path):
        raise ConfigError(name, f"names {path!r}, which is not a file")
    return path


def security_config(env: Env | None = None) -> dict[str, Any]:
    """The librdkafka SASL/TLS settings the environment asks for (empty when it asks for none).

    Raises:
        ConfigError: ``KAFKA_SASL_MECHANISM`` is not PLAIN, SCRAM-SHA-256 or
            SCRAM-SHA-512 (any case); ``KAFKA_TLS`` or
            ``KAFKA_TLS_REJECT_UNAUTHORIZED`` is not true/false/1/0; a TLS file
            variable names no file; a client certificate without its key or
            the other way round. The error's ``variable`` names the culprit.
    """
    e = _environ(env)
    out: dict[str, Any] = {}
    raw_mechanism = (e.get("KAFKA_SASL_MECHANISM") or "").strip()
    sasl = SASL_MECHANISMS.get(raw_mechanism.lower()) if raw_mechanism else None
    if raw_mechanism and sasl is None:
        raise ConfigError(
            "KAFKA_SASL_MECHANISM",
            f"must be one of {', '.join(SASL_MECHANISMS.values())} (any case), not {raw_mechanism!r}",
        )
    verify = _flag(e, "KAFKA_TLS_REJECT_UNAUTHORIZED", True)
    ca = _file(e, "KAFKA_TLS_CA_FILE")
    # As config/load.ts: a CA file alone turns TLS on.
    tls = _flag(e, "KAFKA_TLS", False) or ca is not None
    if sasl is not None:
        out["sasl.mechanism"] = sasl
        out["sasl.username"] = e.get("KAFKA_SASL_USERNAME", "")
        out["sasl.password"] = e.get("KAFKA_SASL_PASSWORD", "")
    if tls:
        cert, key = _file(e, "KAFKA_TLS_CERT_FILE"), _file(e, "KAFKA_TLS_KEY_FILE")
        if (cert is None) != (key is None):
            have, missing = ("KAFKA_TLS_CERT_FILE", "KAFKA_TLS_KEY_FILE") if key is None else ("KAFKA_TLS_KEY_FILE", "KAFKA_TLS_CERT_FILE")
            raise ConfigError(missing, f"is not set but {have} is: a client certificate needs its key")
        if ca is not None:
            out["ssl.ca.location"] = ca
        if cert is not None:
            out["ssl.certificate.location"] = cert
            out["ssl.key.location"] = key
        if not verify:
            # Node's rejectUnauthorized=false skips the host name check too.
            out["enable.ssl.certificate.verification"] = False
            out["ssl.endpoint.identification.algorithm"] = "none"
    if sasl is not None or tls:
        out["security.protocol"] = ("SASL_" if sasl is not None else "") + ("SSL" if tls else "PLAINTEXT")
    return out


def client_config(
    explicit_brokers: str | None = None, config: Mapping[str, Any] | None = None, env: Env | None = None
) -> dict[str, Any]:
    """``bootstrap.servers`` and the environment's SASL/TLS settings, with ``config`` on top (it wins, key by key).

    Raises:
        ConfigError: As :func:`security_config`.
    """
    return {"bootstrap.servers": brokers(explicit_brokers, env), **security_config(env), **dict(config or {})}


def registry_config(env: Env | None = None) -> dict[str, Any]:
    """Schema registry client settings from the environment: basic auth from ``SCHEMA_REGISTRY_USERNAME``/``_PASSWORD``."""
    e = _environ(env)
    user = e.get("SCHEMA_REGISTRY_USERNAME")
    if not user:
        return {}
    return {"basic.auth.user.info": f"{user}:{e.get('SCHEMA_REGISTRY_PASSWORD', '')}"}
