"""The package installs on its own: a wheel of python/, installed into a fresh virtual
environment outside the checkout, publishes a GymResult and reads it back from the real
broker, with its schemas read from the installed package.

The module fixture copies ``pyproject.toml``, ``README.md`` and ``src/`` to a temporary
folder and builds the wheel there (with this interpreter's setuptools when it is recent
enough, else in pip's isolated build environment); makes a virtual environment without pip
with another Python (``RS_WHEEL_PYTHON``, else the 3.12 of pyenv or ``python3.12`` on PATH,
else this one) and installs the wheel into it with this interpreter's pip (``--python``).
The dependencies come from a wheelhouse (``RS_WHEELHOUSE``, default
``.local/wheelhouse/<python tag>``), offline; when it lacks something, ``pip download``
fills it from the index once (~30 MB: confluent-kafka, fastavro, numpy, orjson and the
registry client's packages; no torch). The topics are made by ``./rollout-stream topics
create`` under a fresh ``TOPIC_PREFIX``; the check runs in that environment with ``-I``
(no ``PYTHONPATH``, no user site, no cwd on the path) and its cwd outside the repository,
and the connection comes from the environment variables only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO_ROOT

pytestmark = pytest.mark.integration

PROJECT = REPO_ROOT / "python"
LAUNCHER = REPO_ROOT / "rollout-stream"
PYENV_312 = Path("/root/.pyenv/versions/3.12.1/bin/python")


def _target_python() -> str:
    for cand in (os.environ.get("RS_WHEEL_PYTHON"), str(PYENV_312) if PYENV_312.exists() else None, shutil.which("python3.12")):
        if cand:
            return cand
    return sys.executable


def _run(cmd: list[str], *, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def _recent_setuptools() -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 77  # pyproject's build-system floor


@dataclass
class Installed:
    python: Path
    wheel: Path
    root: Path
    seconds: dict[str, float]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    root = tmp_path_factory.mktemp("wheel-install")
    assert REPO_ROOT not in root.resolve().parents, f"{root} must be outside the checkout"
    seconds: dict[str, float] = {}
    project = root / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(PROJECT / name, project / name)
    shutil.copytree(PROJECT / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))

    t = time.monotonic()
    isolation = ["--no-build-isolation"] if _recent_setuptools() else []
    _run([sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--no-deps", *isolation,
          "-w", str(root / "dist"), str(project)], cwd=root)
    (wheel,) = (root / "dist").glob("rollout_stream-*.whl")
    seconds["build"] = time.monotonic() - t

    t = time.monotonic()
    venv = root / "venv"
    _run([_target_python(), "-m", "venv", "--without-pip", str(venv)], cwd=root)
    python = venv / "bin" / "python"
    tag = _run([str(python), "-c", "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"], cwd=root).stdout.strip()
    wheelhouse = Path(os.environ.get("RS_WHEELHOUSE") or REPO_ROOT / ".local" / "wheelhouse" / tag)
    wheelhouse.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    offline = pip + ["install", "--no-compile", "--no-index", "--find-links", str(wheelhouse), str(wheel)]
    first = subprocess.run(offline, cwd=root, capture_output=True, text=True, timeout=300)
    if first.returncode != 0:  # the wheelhouse lacks a dependency (first run, or new ranges): fill it once
        _run(pip + ["download", "--dest", str(wheelhouse), str(wheel)], cwd=root, timeout=600)
        (wheelhouse / wheel.name).unlink(missing_ok=True)  # ours comes from dist/, never from the wheelhouse
        _run(offline, cwd=root)
    seconds["install"] = time.monotonic() - t
    print(f"wheel {wheel.name}: build {seconds['build']:.1f} s, venv + install {seconds['install']:.1f} s ({tag})")
    return Installed(python=python, wheel=wheel, root=root, seconds=seconds)


def test_the_wheel_ships_the_schemas_and_no_test_or_bench_code(installed):
    import zipfile

    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert {f"rollout_stream/schemas/{n}" for n in ("dead-letter.avsc", "packed.avsc", "row-completed.avsc")} <= names
    assert "rollout_stream/py.typed" in names and "rollout_stream/kafka_env.py" in names
    assert not [n for n in names if n.startswith(("tests/", "rollout_stream_bench/"))]


CHECK = r'''
import importlib.util, json, sys, sysconfig, time, uuid
from pathlib import Path

import rollout_stream
from rollout_stream import RolloutPublisher, kafka_env, row_json, schema_files
from rollout_stream.encode import load_packed_schema, packed_schema_path
from rollout_stream.row_completed_schema import schema_path

load_packed_schema()
group_id = f"wheel-{uuid.uuid4().hex[:8]}"
gym_row = {"responses_create_params": {"input": [{"role": "user", "content": "2+2?"}]}, "agent_ref": {"name": "wheel"}}
gym_result = {
    "reward": 1.0,
    "response": {"output": [{"type": "message", "content": [{"type": "output_text", "text": "4"}],
                             "prompt_token_ids": [1, 2, 3], "generation_token_ids": [4, 5],
                             "generation_log_probs": [-0.5, -1e-7]}]},
}
with RolloutPublisher() as pub:  # topic prefix, broker and registry from the environment
    partition = pub.publish_result(gym_row, gym_result, batch_id="wheel-b1", group_id=group_id, group_index=0,
                                   row_index=0, num_generations=1, prompt_idx=0, weight_version=3)
    pub.flush()
    topic, schema_id = pub.topic, pub.schema_id

from confluent_kafka import Consumer, TopicPartition

c = Consumer(kafka_env.client_config(None, {"group.id": f"wheel-read-{group_id}", "isolation.level": "read_committed",
                                           "enable.auto.commit": False}))
c.assign([TopicPartition(topic, partition, 0)])
msg, deadline = None, time.monotonic() + 30
while msg is None and time.monotonic() < deadline:
    m = c.poll(1.0)
    if m is not None and m.error() is None and m.key() == group_id.encode():
        msg = m
c.close()
assert msg is not None, f"{group_id} did not come back from {topic}[{partition}]"
kind, wire_schema_id, record = row_json.decode(msg.value())
print(json.dumps({
    "site": str(Path(sysconfig.get_paths()["purelib"]).resolve()),
    "paths": {"package": str(Path(rollout_stream.__file__).resolve()),
              "row-completed.avsc": str(Path(str(schema_path())).resolve()),
              "packed.avsc": str(Path(str(packed_schema_path())).resolve()),
              "dead-letter.avsc": str(Path(str(schema_files.schema_file("dead-letter.avsc"))).resolve())},
    "torch": importlib.util.find_spec("torch") is not None,
    "sys_path": sys.path,
    "topic": topic, "schema_id": schema_id, "wire_schema_id": wire_schema_id, "kind": kind,
    "group_id": group_id, "record": {k: record[k] for k in ("group_id", "batch_id", "weight_version")},
    "gym_result": row_json.gym_result_object(record),
}))
'''


@pytest.fixture
def prefixed_topics(kafka_env):
    """A fresh ``TOPIC_PREFIX`` whose topics ``./rollout-stream topics create`` made; deleted afterwards."""
    from confluent_kafka.admin import AdminClient

    prefix = f"pytest-wheel.{uuid.uuid4().hex[:10]}."
    env = {**os.environ, "KAFKA_BROKERS": kafka_env.brokers, "SCHEMA_REGISTRY_URL": kafka_env.registry_url, "TOPIC_PREFIX": prefix}
    _run([str(LAUNCHER), "topics", "create"], cwd=REPO_ROOT, env=env, timeout=180)
    yield prefix
    admin = AdminClient({"bootstrap.servers": kafka_env.brokers})
    mine = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    for fut in admin.delete_topics(mine).values() if mine else []:
        try:
            fut.result(timeout=30)
        except Exception:
            pass


def test_the_installed_wheel_publishes_a_gym_result_and_reads_it_back_with_its_own_schemas(installed, kafka_env, prefixed_topics):
    script = installed.root / "check_install.py"
    script.write_text(CHECK)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "ROLLOUT_STREAM_"))}
    env.update(KAFKA_BROKERS=kafka_env.brokers, SCHEMA_REGISTRY_URL=kafka_env.registry_url, TOPIC_PREFIX=prefixed_topics)
    out = _run([str(installed.python), "-I", str(script)], cwd=installed.root, env=env, timeout=120)
    got = json.loads(out.stdout.strip().splitlines()[-1])

    site = Path(got["site"])
    assert installed.root in site.parents, f"site-packages {site} is not the fresh venv's"
    for what, path in got["paths"].items():
        assert site in Path(path).parents, f"{what} was read from {path}, not from {site}"
        assert REPO_ROOT not in Path(path).parents, f"{what} was read from the checkout: {path}"
    assert not any(str(REPO_ROOT) in p for p in got["sys_path"]), got["sys_path"]
    assert got["torch"] is False  # the core install needs no torch

    assert got["topic"] == f"{prefixed_topics}rollout.row-completed"
    assert got["kind"] == "gym_result" and got["wire_schema_id"] == got["schema_id"]
    assert got["record"] == {"group_id": got["group_id"], "batch_id": "wheel-b1", "weight_version": 3}
    out_item = got["gym_result"]["response"]["output"][0]
    assert out_item["generation_token_ids"] == [4, 5] and out_item["generation_log_probs"] == [-0.5, -1e-7]
