"""Running one rollout through NeMo-Gym: the agent server's ``/run``, as NeMo-Gym's collection calls it.

Two ways to make the same call, chosen by :func:`open_runner`:

- ``nemo_gym``: NeMo-Gym's own ``ServerClient`` (the one
  ``RolloutCollectionHelper.run_examples`` uses): it reads the global config
  from the head server and routes by ``agent_ref.name``, with NeMo-Gym's
  request retries (connection drops are retried, other errors raise). Needs
  the ``nemo-gym`` package (Python >= 3.12).
- ``http``: the head server's ``/server_instances`` list and a plain HTTP
  POST to ``<agent URL>/run`` per rollout, retrying a refused or dropped
  connection like NeMo-Gym does; for a rollout worker whose Python has no
  NeMo-Gym (3.10, 3.11).

Either way a rollout ends as a result dict or an exception; what counts as a
failure, and how often it is retried, is the collector's business
(:mod:`rollout_stream.gym.collector`).
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Literal, Mapping
from urllib.parse import urlparse

from ..errors import RolloutStreamError

Backend = Literal["auto", "nemo_gym", "http"]
RunOne = Callable[[Mapping[str, Any]], Awaitable[dict]]
CONNECT_RETRIES = 3


class GymUnavailableError(RolloutStreamError):
    """NeMo-Gym's head server (or the agent a row names) cannot be reached or does not exist."""

    code = "gym_unavailable"


class RolloutFailedError(RolloutStreamError):
    """An agent server answered a rollout with an error."""

    code = "rollout_failed"


def nemo_gym_available() -> bool:
    try:
        import nemo_gym.server_utils  # noqa: F401
    except Exception:  # noqa: BLE001 - missing, or its import fails on this Python
        return False
    return True


class Runner:
    """Runs rollouts (``await runner.run(row)`` → NeMo-Gym's result dict); ``close()`` when done."""

    backend: str

    async def run(self, row: Mapping[str, Any]) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    def agents(self) -> set[str]:  # pragma: no cover - interface
        raise NotImplementedError

    async def close(self) -> None:
        return None


class NemoGymRunner(Runner):
    backend = "nemo_gym"

    def __init__(self, head_url: str) -> None:
        from nemo_gym.config_types import BaseServerConfig
        from nemo_gym.rollout_collection import RolloutCollectionHelper

        from nemo_gym.server_utils import is_global_aiohttp_client_setup

        u = urlparse(head_url)
        # NeMo-Gym's HTTP client is one aiohttp session per process, bound to the event loop it was made in;
        # one made here is closed again in close(), so the next collect (another loop) makes its own.
        self._owns_session = not is_global_aiohttp_client_setup()
        try:
            self._client = RolloutCollectionHelper().setup_server_client(BaseServerConfig(host=u.hostname, port=u.port))
        except Exception as e:  # noqa: BLE001 - requests' connection errors, bad answers
            raise GymUnavailableError(f"NeMo-Gym head server at {head_url} did not answer: {e}", cause=e) from e

    def agents(self) -> set[str]:
        cfg = self._client.global_config_dict
        return {k for k, v in cfg.items() if hasattr(v, "keys") and "responses_api_agents" in v}

    async def run(self, row: Mapping[str, Any]) -> dict:
        from nemo_gym.server_utils import get_response_json, raise_for_status

        res = await self._client.post(server_name=row["agent_ref"]["name"], url_path="/run", json=dict(row))
        try:
            await raise_for_status(res)
        except Exception as e:  # noqa: BLE001 - aiohttp's ClientResponseError
            body = getattr(e, "response_content", b"") or b""
            raise RolloutFailedError(f"agent {row['agent_ref']['name']} answered HTTP {res.status}: {body[:300]!r}", status=res.status) from e
        return await get_response_json(res)

    async def close(self) -> None:
        if not self._owns_session:
            return
        import nemo_gym.server_utils as su

        session = su.get_global_aiohttp_client() if su.is_global_aiohttp_client_setup() else None
        if session is not None:
            await session.close()
            su._GLOBAL_AIOHTTP_CLIENT = None  # what its global_aiohttp_client_exit() resets, but inside this loop


class HttpRunner(Runner):
    backend = "http"

    def __init__(self, head_url: str, concurrency: int, timeout: float) -> None:
        self.head_url = head_url.rstrip("/")
        self.timeout = timeout
        try:
            with urllib.request.urlopen(f"{self.head_url}/server_instances", timeout=10) as r:
                instances = json.loads(r.read())
        except (OSError, ValueError) as e:
            raise GymUnavailableError(f"NeMo-Gym head server at {head_url} did not list its servers: {e}", cause=e) from e
        self._urls = {i["process_name"]: i["url"] for i in instances if i.get("url") and i.get("server_type") == "responses_api_agents"}
        self._pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="gym-run")

    def agents(self) -> set[str]:
        return set(self._urls)

    def _post(self, url: str, body: bytes) -> dict:
        req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
        for attempt in range(1, CONNECT_RETRIES + 1):
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    return json.loads(r.read())
            except urllib.error.HTTPError as e:
                raise RolloutFailedError(f"{url} answered HTTP {e.code}: {e.read()[:300]!r}", status=e.code) from e
            except OSError:
                if attempt == CONNECT_RETRIES:
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")

    async def run(self, row: Mapping[str, Any]) -> dict:
        name = row["agent_ref"]["name"]
        url = self._urls.get(name)
        if url is None:
            raise GymUnavailableError(f"agent {name!r} is not among the head server's agents {sorted(self._urls)}")
        body = json.dumps(row).encode()
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._post, f"{url}/run", body)

    async def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def open_runner(head_url: str, backend: Backend = "auto", *, concurrency: int = 16, timeout: float = 600.0) -> Runner:
    """A :class:`Runner` for the NeMo-Gym deployment whose head server is at ``head_url``.

    Raises:
        GymUnavailableError: The head server does not answer, or ``backend="nemo_gym"``
            where the ``nemo-gym`` package cannot be imported.
    """
    if backend == "nemo_gym" or (backend == "auto" and nemo_gym_available()):
        if not nemo_gym_available():
            raise GymUnavailableError("backend nemo_gym needs the nemo-gym package (Python >= 3.12) in this environment")
        return NemoGymRunner(head_url)
    return HttpRunner(head_url, concurrency, timeout)
