"""Starts NeMo-Gym's own servers on 127.0.0.1 without Ray or uv (tests and `demo --gym`).

Runs inside NeMo-Gym's virtual environment (`scripts/gym-env.sh`). NeMo-Gym's
`gym env start` would create one uv venv per server and start a local Ray
cluster, which binds the machine's other addresses; nothing these servers do
needs Ray. So this script does what `gym env start` does with the rest:
resolves the global config with NeMo-Gym's own parser (config files of the
package, the policy model pointed at `--policy-url`), runs NeMo-Gym's head
server in this process, and starts every server's own `app.py` from the
installed package with the resolved config in `NEMO_GYM_CONFIG_DICT`, with
`initialize_ray` replaced by a no-op before the server module runs.

    python tools/gym/servers.py --policy-url http://127.0.0.1:PORT/v1 [--head-port P]

Prints `ready <head server URL>` once every server answers, then waits;
SIGTERM or SIGINT stops the servers. Default servers: `vllm_model` (token ids
on), `simple_agent` over `example_single_tool_call` and over
`example_multi_step`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

# The resource servers' own configs (each also defines its simple_agent); the
# policy model's config is vllm_model's training one (return_token_id_information: true).
DEFAULT_CONFIGS = [
    "responses_api_models/vllm_model/configs/vllm_model_for_training.yaml",
    "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
    "resources_servers/example_multi_step/configs/example_multi_step.yaml",
]

# Runs one server's app.py as `python app.py` would, with Ray's start-up skipped.
SERVER_BOOT = (
    "import runpy, sys, nemo_gym.server_utils as s; s.initialize_ray = lambda: None; "
    "sys.argv = ['app.py']; runpy.run_path('app.py', run_name='__main__')"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resolve_config(policy_url: str, head_port: int, configs: list[str], model_name: str) -> dict:
    """NeMo-Gym's resolved global config: every server on 127.0.0.1 with a port of its own."""
    from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig
    from omegaconf import OmegaConf

    initial = {
        "config_paths": configs,
        "policy_base_url": policy_url,
        "policy_api_key": "EMPTY",
        "policy_model_name": model_name,
        "default_host": "127.0.0.1",
        "head_server": {"host": "127.0.0.1", "port": head_port},
        "skip_venv_if_present": True,
    }
    cfg = GlobalConfigDictParser().parse(
        GlobalConfigDictParserConfig(
            initial_global_config_dict=OmegaConf.create(initial), skip_load_from_cli=True, skip_load_from_dotenv=True
        )
    )
    return OmegaConf.to_container(cfg, resolve=True)


def server_instances(cfg: dict) -> list[tuple[str, str, str, dict]]:
    """(instance name, server type, implementation, its config) for every server with an entrypoint."""
    out = []
    for name, v in cfg.items():
        if not isinstance(v, dict) or len(v) != 1:
            continue
        (kind, impls), = v.items()
        if not isinstance(impls, dict) or len(impls) != 1:
            continue
        (impl, conf), = impls.items()
        if isinstance(conf, dict) and "entrypoint" in conf:
            out.append((name, kind, impl, conf))
    return out


def wait_up(url: str, proc: subprocess.Popen | None, name: str, deadline: float) -> None:
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"NeMo-Gym server {name} exited with {proc.returncode} before it answered at {url}")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"NeMo-Gym server {name} did not answer at {url} in time")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy-url", required=True, help="OpenAI-compatible base URL of the policy (ends in /v1)")
    ap.add_argument("--head-port", type=int, default=0, help="head server port (default: a free one)")
    ap.add_argument("--model-name", default="toy-policy")
    ap.add_argument("--config", action="append", help="NeMo-Gym config path (repeatable; default: the three above)")
    ap.add_argument("--log-dir", default=None, help="one log file per server here (default: inherit stderr)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for every server")
    args = ap.parse_args(argv)

    import nemo_gym
    from omegaconf import OmegaConf

    gym_root = Path(nemo_gym.__file__).resolve().parents[1]
    head_port = args.head_port or free_port()
    cfg = resolve_config(args.policy_url, head_port, args.config or DEFAULT_CONFIGS, args.model_name)
    cfg_yaml = OmegaConf.to_yaml(OmegaConf.create(cfg))
    os.environ["NEMO_GYM_CONFIG_DICT"] = cfg_yaml  # read by the head server in this process

    from nemo_gym.server_utils import HeadServer

    procs: list[tuple[str, subprocess.Popen, str]] = []
    log_dir = Path(args.log_dir) if args.log_dir else None
    if log_dir:
        log_dir.mkdir(parents=True, exist_ok=True)
    try:
        _uv, _thread, head = HeadServer.run_webserver()
        instances = []
        for name, kind, impl, conf in server_instances(cfg):
            env = {**os.environ, "NEMO_GYM_CONFIG_DICT": cfg_yaml, "NEMO_GYM_CONFIG_PATH": name, "PYTHONUNBUFFERED": "1"}
            out = open(log_dir / f"{name}.log", "wb") if log_dir else None
            p = subprocess.Popen(
                [sys.executable, "-c", SERVER_BOOT], cwd=gym_root / kind / impl, env=env, stdout=out, stderr=subprocess.STDOUT if out else None
            )
            url = f"http://{conf['host']}:{conf['port']}"
            procs.append((name, p, url))
            instances.append(
                {"process_name": name, "server_type": kind, "name": impl, "host": conf["host"], "port": conf["port"], "url": url, "pid": p.pid}
            )
        head.set_server_instances(instances)
        deadline = time.time() + args.timeout
        head_url = f"http://127.0.0.1:{head_port}"
        wait_up(head_url + "/", None, "head_server", deadline)
        for name, p, url in procs:
            wait_up(url + "/", p, name, deadline)
        print(f"ready {head_url} {json.dumps({n: u for n, _, u in procs})}", flush=True)

        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        signal.signal(signal.SIGINT, lambda *_: stop.append(1))
        while not stop:
            for name, p, _ in procs:
                if p.poll() is not None:
                    print(f"NeMo-Gym server {name} exited with {p.returncode}", file=sys.stderr, flush=True)
                    return 1
            time.sleep(0.5)
        return 0
    finally:
        for _, p, _ in procs:
            if p.poll() is None:
                p.terminate()
        for _, p, _ in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    sys.exit(main())
