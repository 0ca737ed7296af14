"""Writer schemas by id, from a Confluent-API schema registry, cached.

Schema ids are immutable in a registry, so a parsed schema is cached for
the life of the process (confluent-kafka's client caches the raw text too).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from . import kafka_env
from .avro_body import parse_writer_schema
from .errors import RegistryUnavailableError, UnknownSchemaError

DEFAULT_REGISTRY_URL = kafka_env.DEFAULT_REGISTRY_URL


def make_registry_client(url: str, conf: dict[str, Any] | None = None) -> SchemaRegistryClient:
    """A ``SchemaRegistryClient`` for ``url`` with short timeouts and few retries.

    Args:
        url: Registry base URL: a Confluent Schema Registry's root
            (``https://host:8081``) or Apicurio's ``.../apis/ccompat/v7``; a
            trailing slash does not matter, and user-info
            (``https://key:secret@host``) is basic auth.
        conf: More confluent-kafka registry settings (``basic.auth.user.info``,
            ``ssl.ca.location``, ...); they override the defaults here and the
            credentials of ``$SCHEMA_REGISTRY_USERNAME``/``_PASSWORD``.
    """
    settings: dict[str, Any] = {"url": url, "timeout": 10, "max.retries": 1, "retries.wait.ms": 200}
    settings.update(kafka_env.registry_config())
    settings.update(conf or {})
    return SchemaRegistryClient(settings)


def display_url(url: str) -> str:
    """``url`` as messages show it: without user-info (credentials) or a trailing slash."""
    parts = []
    for one in url.split(","):
        s = urlsplit(one.strip())
        host = s.netloc.rsplit("@", 1)[-1]
        parts.append(urlunsplit((s.scheme, host, s.path, s.query, s.fragment)).rstrip("/"))
    return ",".join(parts)


def _client_url(client: Any) -> str:
    urls = getattr(getattr(client, "_rest_client", None), "base_urls", None)
    return display_url(",".join(urls)) if urls else "<registry>"


class SchemaResolver:
    """Parsed ``PackedGroup`` writer schemas by registry id.

    Args:
        registry: A ``SchemaRegistryClient`` or the registry URL.
    """

    def __init__(self, registry: SchemaRegistryClient | str) -> None:
        self.client = make_registry_client(registry) if isinstance(registry, str) else registry
        self.url = display_url(registry) if isinstance(registry, str) else _client_url(registry)
        self._parsed: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def parsed(self, schema_id: int) -> dict[str, Any]:
        """The parsed writer schema for ``schema_id``.

        Raises:
            UnknownSchemaError: The registry has no schema with that id.
            RegistryUnavailableError: The registry cannot be reached or fails.
            DecodeError: The schema is not a PackedGroup record.
        """
        hit = self._parsed.get(schema_id)
        if hit is not None:
            return hit
        with self._lock:
            hit = self._parsed.get(schema_id)
            if hit is None:
                hit = parse_writer_schema(self._fetch(schema_id).schema_str)
                self._parsed[schema_id] = hit
        return hit

    def _fetch(self, schema_id: int):
        try:
            return self.client.get_schema(schema_id)
        except SchemaRegistryError as e:
            if e.http_status_code == 404:
                raise UnknownSchemaError(
                    f"schema id {schema_id} is unknown to the registry at {self.url}", schema_id=schema_id, cause=e
                ) from e
            raise RegistryUnavailableError(
                f"registry at {self.url} failed to return schema id {schema_id}: "
                f"HTTP {e.http_status_code}: {e.error_message}",
                schema_id=schema_id,
                cause=e,
            ) from e
        except Exception as e:  # httpx connection/timeouts
            raise RegistryUnavailableError(
                f"schema registry at {self.url} is unreachable ({type(e).__name__}: {e}); "
                "check SCHEMA_REGISTRY_URL",
                schema_id=schema_id,
                cause=e,
            ) from e

    def check(self) -> None:
        """Fails fast when the registry cannot be reached.

        Raises:
            RegistryUnavailableError: No answer, or a server error.
        """
        try:
            self.client.get_subjects()
        except Exception as e:
            raise RegistryUnavailableError(
                f"schema registry at {self.url} is unreachable ({type(e).__name__}: {e}); check SCHEMA_REGISTRY_URL",
                cause=e,
            ) from e


class StaticResolver(SchemaResolver):
    """A registry stand-in holding fixed schemas by id (tests, bench, offline files).

    Args:
        schemas: Schema id → writer schema (JSON text, dict or parsed).
    """

    def __init__(self, schemas: dict[int, Any]) -> None:
        self.client = None
        self.url = "<static schemas>"
        self._parsed = {int(k): parse_writer_schema(v) for k, v in schemas.items()}
        self._lock = threading.Lock()

    def _fetch(self, schema_id: int):
        raise UnknownSchemaError(
            f"schema id {schema_id} is unknown (static schemas: {sorted(self._parsed)})", schema_id=schema_id
        )

    def parsed(self, schema_id: int) -> dict[str, Any]:
        hit = self._parsed.get(schema_id)
        if hit is None:
            self._fetch(schema_id)
        return hit

    def check(self) -> None:
        return None


_by_client: "weakref.WeakKeyDictionary[Any, SchemaResolver]" = weakref.WeakKeyDictionary()
_by_url: dict[str, SchemaResolver] = {}
_resolvers_lock = threading.Lock()


def resolver_for(registry: SchemaResolver | SchemaRegistryClient | str) -> SchemaResolver:
    """One shared resolver (and so one cache) per registry client or URL."""
    if isinstance(registry, SchemaResolver):
        return registry
    with _resolvers_lock:
        if isinstance(registry, str):
            res = _by_url.get(registry)
            if res is None:
                res = _by_url[registry] = SchemaResolver(registry)
            return res
        res = _by_client.get(registry)
        if res is None:
            res = _by_client[registry] = SchemaResolver(registry)
        return res

