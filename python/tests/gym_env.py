"""NeMo-Gym for the collector's tests: its venv, its example tasks, and its servers in front of the toy policy.

``gym`` (a session fixture in conftest.py) starts the toy policy
(tools/gym/toy_policy.py, recording to ``policy.jsonl``, failing rollout 1 of
any prompt that contains ``FAIL_MARK``) and NeMo-Gym's own servers
(tools/gym/servers.py) once for every test that needs them.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from test_publisher_pipeline import wait_for_line

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools" / "gym"
FAIL_MARK = "FAIL-THIS-PROMPT"


def gym_python() -> str:
    out = subprocess.run([str(ROOT / "scripts" / "gym-env.sh"), "--print"], capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, f"NeMo-Gym's environment did not install: {out.stderr[-3000:]}"
    return out.stdout.strip().splitlines()[-1]


def gym_tasks() -> list[dict]:
    """One task of each resource server, from the installed package's own example data."""
    py = gym_python()
    site = subprocess.run([py, "-c", "import nemo_gym, pathlib; print(pathlib.Path(nemo_gym.__file__).parents[1])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    tasks = []
    for server, agent, line in [("example_single_tool_call", "example_single_tool_call_simple_agent", 0),
                                ("example_multi_step", "example_multi_step_simple_agent", 1)]:
        rows = Path(site, "resources_servers", server, "data", "example.jsonl").read_text().splitlines()
        task = json.loads(rows[line])
        task["agent_ref"] = {"name": agent}
        tasks.append(task)
    return tasks


def start_gym(tmp_path_factory):
    """The toy policy and NeMo-Gym's servers in front of it; yields (head URL, policy record file, gym python)."""
    d = tmp_path_factory.mktemp("gym")
    py = gym_python()
    record = d / "policy.jsonl"
    policy = subprocess.Popen([sys.executable, str(TOOLS / "toy_policy.py"), "--port", "0", "--seed", "11",
                               "--record", str(record), "--fail-on", FAIL_MARK, "--fail-seed", "1"], stdout=subprocess.PIPE, text=True)
    url = wait_for_line(policy, r"^listening ", 30).split()[1]
    servers = subprocess.Popen([py, str(TOOLS / "servers.py"), "--policy-url", f"{url}/v1", "--log-dir", str(d / "logs")],
                               stdout=subprocess.PIPE, text=True)
    try:
        head = wait_for_line(servers, r"^ready ", 180).split()[1]
        yield head, record, py
    finally:
        for p in (servers, policy):
            p.send_signal(signal.SIGTERM)
        for p in (servers, policy):
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
