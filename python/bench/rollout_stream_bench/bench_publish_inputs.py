"""Inputs of ``bench publish``: GymResult JSON lines, from a file or the TypeScript load generator.

The load generator (``./rollout-stream loadgen --format gym-result
--dry-run``) is the one source of realistic shapes in this repository
(multi-turn output items with token ids and logprobs; ``router-replay``
adds ``nrlre1`` routed-experts envelopes), so the bench runs it as a
subprocess rather than keeping a Python copy of its profiles; outside the
repository, ``--input FILE`` takes lines it (or anything else) wrote.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollout_stream.errors import RolloutStreamError

PROFILES = ("published-max", "router-replay")
DEFAULT_ROWS = {"published-max": 256, "router-replay": 32}
_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@dataclass
class Workload:
    """The publish_result arguments of one profile and the records they encode to."""

    name: str
    source: str
    results: list[dict[str, Any]]
    records: list[tuple[bytes, bytes, int]] = field(default_factory=list)
    topic: str = ""

    @property
    def nbytes(self) -> int:
        return sum(len(v) for _, v, _ in self.records)


def results_from_lines(lines: Iterable[str], source: str) -> list[dict[str, Any]]:
    """``publish_result`` keyword arguments from GymResult JSON lines (``batch_end`` lines skipped).

    Logprobs spelled ``"NaN"``/``"Infinity"`` (the JSON form) become floats,
    as a rollout worker holds them; the record bytes are the same either way.

    Raises:
        ValueError: A line is not JSON, or there is no GymResult line at all.
    """
    from rollout_stream.row_json import from_json

    out = []
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{source} line {n} is not JSON: {e}") from None
        kind, kwargs = from_json(obj)
        if kind == "batch_end":
            continue
        if kind != "gym_result":
            raise ValueError(f"{source} line {n} is a {kind}, not a GymResult (gym_row + gym_result)")
        _float_logprobs(kwargs.get("gym_result"))
        out.append(kwargs)
    if not out:
        raise ValueError(f"{source} holds no GymResult line")
    return out


def _float_logprobs(result: Any) -> None:
    response = result.get("response") if isinstance(result, dict) else None
    output = response.get("output") if isinstance(response, dict) else None
    for item in output if isinstance(output, list) else []:
        lp = item.get("generation_log_probs") if isinstance(item, dict) else None
        if isinstance(lp, list) and any(type(x) is str for x in lp):
            item["generation_log_probs"] = [_SPECIAL.get(x, x) if type(x) is str else x for x in lp]


def repo_root() -> Path | None:
    """The repository holding this package (with ``./rollout-stream`` and ``loadgen/``), if it is one."""
    here = Path(__file__).resolve().parents  # python/bench/rollout_stream_bench/ in a checkout
    for base in ([here[3]] if len(here) > 3 else []) + [Path.cwd()]:
        if (base / "rollout-stream").is_file() and (base / "loadgen").is_dir():
            return base
    return None


def loadgen_lines(profile: str, rows: int, generations: int, seed: int, root: Path) -> list[str]:
    """GymResult JSON lines from the TypeScript load generator (``--dry-run``, one batch)."""
    groups = max(1, -(-rows // generations))
    cmd = [
        str(root / "rollout-stream"), "loadgen", "--format", "gym-result", "--dry-run", "--quiet",
        "--profile", profile, "--batches", "1", "--groups", str(groups), "--generations", str(generations),
        "--seed", str(seed),
    ]
    try:
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RolloutStreamError(f"could not run the load generator ({' '.join(cmd)}): {e}; pass --input FILE") from e
    if done.returncode != 0:
        tail = (done.stderr or "").strip().splitlines()[-5:]
        raise RolloutStreamError(f"the load generator failed ({' '.join(cmd)}): exit {done.returncode}: {' | '.join(tail)}")
    return done.stdout.splitlines()


def build_workloads(args: argparse.Namespace, root: Path | None = None) -> list[Workload]:
    """The profiles' results, from ``--input`` or the load generator; ``--rows`` takes the first N (cycling)."""
    if args.input:
        path = Path(args.input)
        with path.open(encoding="utf-8") as f:
            results = results_from_lines(f, str(path))
        rows = args.rows or len(results)
        return [Workload(path.name, f"{path} ({len(results)} GymResults)", _take(results, rows))]
    root = root or repo_root()
    if root is None:
        raise RolloutStreamError(
            "no --input and not inside the repository (no ./rollout-stream to generate GymResults with); "
            "pass --input FILE of GymResult JSON lines, e.g. from `./rollout-stream loadgen --format gym-result --dry-run`"
        )
    out = []
    for profile in PROFILES if args.profile == "both" else (args.profile,):
        rows = args.rows or DEFAULT_ROWS[profile]
        lines = loadgen_lines(profile, rows, args.generations, args.seed, root)
        results = results_from_lines(lines, f"loadgen --profile {profile}")
        source = f"./rollout-stream loadgen --format gym-result --profile {profile} --seed {args.seed}"
        out.append(Workload(profile, source, _take(results, rows)))
    return out


def _take(results: list[dict[str, Any]], rows: int) -> list[dict[str, Any]]:
    return [results[i % len(results)] for i in range(rows)]
