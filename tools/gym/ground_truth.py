"""Checks packed groups against what the toy policy recorded it generated (tests and `demo --gym`).

The toy policy (toy_policy.py) appends every prompt it tokenized and every
generation (token ids, logprobs, and the prompt it answered) to its record.
A packed row is right when each run of its token mask is one generation of
the policy, token for token; the tokens before it are exactly the prompt
that generation answered (and a prompt the policy tokenized); the logprobs
there are the policy's, rounded to the trainer's float32, and zero
elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


class PolicyRecord:
    """The toy policy's record file, re-read as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.generations: dict[tuple, dict] = {}
        self.prompts: set[tuple] = set()
        self._pos = 0

    def refresh(self) -> None:
        with self.path.open() as f:
            f.seek(self._pos)
            for line in f:
                if not line.endswith("\n"):
                    break
                self._pos += len(line.encode())
                r = json.loads(line)
                if r["kind"] == "generate":
                    self.generations[tuple(r["ids"])] = r
                else:
                    self.prompts.add(tuple(r["prompt_ids"]))


def mask_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of non-zero values."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], (mask != 0).astype(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def _values(field: Any) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of a jagged field, numpy or torch."""
    if hasattr(field, "offsets") and not callable(field.offsets):
        return np.asarray(field.values), np.asarray(field.offsets)
    return field.values().numpy(), field.offsets().numpy()


def check_group(fields: dict, sample_ids: list, record: PolicyRecord) -> tuple[int, list[str]]:
    """(generated tokens checked, mismatches) of one packed group against the policy's record."""
    record.refresh()
    ids, offsets = _values(fields["input_ids"])
    mask, _ = _values(fields["token_mask"])
    lps, _ = _values(fields["generation_logprobs"])
    checked, bad = 0, []
    for r, sid in enumerate(sample_ids):
        lo, hi = int(offsets[r]), int(offsets[r + 1])
        row_ids, row_mask, row_lp = ids[lo:hi], mask[lo:hi], lps[lo:hi]
        turns = mask_runs(row_mask)
        if not turns:
            bad.append(f"{sid}: no generated token")
        for start, end in turns:
            gen = record.generations.get(tuple(row_ids[start:end].tolist()))
            if gen is None:
                bad.append(f"{sid}: tokens [{start}, {end}) are no generation of the policy")
                continue
            if tuple(row_ids[:start].tolist()) != tuple(gen["prompt_ids"]):
                bad.append(f"{sid}: the tokens before [{start}, {end}) are not the prompt that generation answered")
            elif tuple(gen["prompt_ids"]) not in record.prompts:
                bad.append(f"{sid}: the prompt before [{start}, {end}) was never tokenized by the policy")
            if not np.array_equal(row_lp[start:end], np.asarray(gen["logprobs"], dtype=np.float32)):
                bad.append(f"{sid}: logprobs of [{start}, {end}) differ from the policy's")
            checked += end - start
        if row_lp[row_mask == 0].any():
            bad.append(f"{sid}: a logprob outside the generated tokens")
    return checked, bad
