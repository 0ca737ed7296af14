"""Both registry URL forms from Python, against the real registry (SCHEMA_REGISTRY_URL).

A Confluent Schema Registry is addressed at its root (``http://host:8081``,
requests like ``/subjects/<s>/versions``); Apicurio at its compatibility
path (``.../apis/ccompat/v7``). A small reverse proxy on 127.0.0.1 serves the
real registry at its root (path rewrite only; bodies and headers pass
through, or with ``auth`` a 401 without those credentials), so the
publisher's registration and the consumer's lookups by id run against a
root-form URL, with basic auth from the client settings or the URL's
user-info.
"""

from __future__ import annotations

import base64
import http.client
import threading
import uuid
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, urlsplit

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from rollout_stream import RolloutPublisher
from rollout_stream.errors import RegistryUnavailableError
from rollout_stream.registry import SchemaResolver, make_registry_client

pytestmark = pytest.mark.integration


@contextmanager
def registry_at_root(target: str, auth: tuple[str, str] | None = None):
    """Yields ``(url, paths)``: ``http://127.0.0.1:<port>`` serving ``target`` at its root, and the paths it got."""
    base = urlsplit(target)
    prefix = base.path.rstrip("/")
    expected = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode() if auth else None
    paths: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _forward(self) -> None:
            paths.append(self.path)
            if expected and self.headers.get("Authorization") != expected:
                body = b'{"error_code":401,"message":"Unauthorized"}'
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "authorization", "connection")}
            conn = http.client.HTTPConnection(base.hostname, base.port or 80, timeout=30)
            try:
                conn.request(self.command, prefix + self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            finally:
                conn.close()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _forward

        def log_message(self, *_args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", paths
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def row_topic_prefix(kafka_env):
    prefix = f"pytest-regurl.{uuid.uuid4().hex[:10]}."
    topic = f"{prefix}rollout.row-completed"
    admin = AdminClient({"bootstrap.servers": kafka_env.brokers})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(timeout=30)
    yield prefix
    for fut in admin.delete_topics([topic]).values():
        try:
            fut.result(timeout=30)
        except Exception:
            pass


def _clean(paths: list[str]) -> bool:
    return all(p.startswith("/") and not p.startswith("//") and "/apis/" not in p for p in paths)


def test_root_url_publisher_registers_and_resolver_reads(kafka_env, row_topic_prefix, packed_topic):
    topic, packed_id = packed_topic
    with registry_at_root(kafka_env.registry_url) as (url, paths):
        pub = RolloutPublisher(brokers=kafka_env.brokers, registry_url=url, topic_prefix=row_topic_prefix)
        try:
            via_path = RolloutPublisher(
                brokers=kafka_env.brokers, registry_url=kafka_env.registry_url.rstrip("/") + "/", topic_prefix=row_topic_prefix
            )
            try:
                assert pub.schema_id == via_path.schema_id
            finally:
                via_path.close()
        finally:
            pub.close()
        resolver = SchemaResolver(url + "/")
        resolver.check()
        assert resolver.parsed(packed_id)["name"].endswith("PackedGroup")
    assert any(p.startswith("/subjects/") for p in paths)
    assert any(p.startswith("/schemas/ids/") for p in paths)
    assert _clean(paths), paths


def test_root_url_with_basic_auth_from_settings_or_user_info(kafka_env, packed_topic):
    _topic, packed_id = packed_topic
    user, password = "rs-user", "p@ss:word"
    with registry_at_root(kafka_env.registry_url, auth=(user, password)) as (url, paths):
        by_conf = SchemaResolver(make_registry_client(url, {"basic.auth.user.info": f"{user}:{password}"}))
        assert by_conf.parsed(packed_id)["name"].endswith("PackedGroup")
        host = url.removeprefix("http://")
        by_url = SchemaResolver(f"http://{quote(user, safe='')}:{quote(password, safe='')}@{host}")
        by_url.check()
        assert by_url.parsed(packed_id)["name"].endswith("PackedGroup")
        assert password not in by_url.url and quote(password, safe="") not in by_url.url
        with pytest.raises(RegistryUnavailableError) as e:
            SchemaResolver(url).parsed(packed_id)
        assert "401" in str(e.value)
    assert _clean(paths), paths
