"""Hand-built packed groups for the tests (Avro records from numpy rows)."""

from __future__ import annotations

import numpy as np

from rollout_stream.encode import dense_field, jagged_field, object_field, packed_record, row_tags


def text_group(group_id: str = "grp-1", *, lengths=(5, 3, 0, 7), narrow: bool = True, seed: int = 0, prompt: int = 2) -> dict:
    """A group shaped like the packer's output, with known values.

    Returns the Avro record; ``expected`` arrays live under ``record["_expected"]``.
    """
    rng = np.random.default_rng(seed)
    ids = [rng.integers(0, 150_000, size=n, dtype=np.int64) for n in lengths]
    logp = [(-rng.random(n)).astype(np.float32) for n in lengths]
    mask = [np.array([0] * min(prompt, n) + [1] * max(n - prompt, 0), dtype=np.int64) for n in lengths]
    n = len(lengths)
    prompt_ids = np.stack([np.pad(x[:prompt], (0, prompt - len(x[:prompt]))) for x in ids]).astype(np.int64)
    reward = rng.random(n).astype(np.float32)
    fields = [
        jagged_field("input_ids", ids, "int64", "int32" if narrow else None),
        jagged_field("generation_logprobs", logp, "float32"),
        jagged_field("token_mask", mask, "int64", "uint8" if narrow else None),
        dense_field("input_lengths", np.array(lengths, dtype=np.int32), "int32"),
        dense_field("sample_mask", np.ones(n, np.float32), "float32"),
        dense_field("total_reward", reward, "float32"),
        dense_field("mask_sample", np.array([i % 2 == 1 for i in range(n)]), "bool", "uint8" if narrow else None),
        dense_field("truncated", np.array([i == 0 for i in range(n)]), "bool", "uint8" if narrow else None),
        dense_field("prompt_ids_for_adv", prompt_ids, "int64", "int32" if narrow else None),
    ]
    tags = [
        row_tags(
            weight_version=11,
            prompt_idx=42,
            group_id=group_id,
            counts={"num_assistant_messages": i + 1, "num_invalid_tool_calls": i % 2},
        )
        for i in range(n)
    ]
    rec = packed_record(group_id, "batch-7", fields, tags)
    rec["_expected"] = {
        "input_ids": ids,
        "generation_logprobs": logp,
        "token_mask": mask,
        "input_lengths": np.array(lengths, dtype=np.int32),
        "total_reward": reward,
        "prompt_ids_for_adv": prompt_ids,
    }
    return rec


def clean(rec: dict) -> dict:
    """The record without the test-only ``_expected`` key."""
    return {k: v for k, v in rec.items() if not k.startswith("_")}


def routed_group(group_id: str = "moe-1", lengths=(4, 0, 6), layers: int = 3, topk: int = 2, dtype: str = "int16") -> dict:
    rng = np.random.default_rng(3)
    routes = [rng.integers(-1, 64, size=(n, layers, topk)).astype(dtype) for n in lengths]
    ids = [np.arange(n, dtype=np.int64) + 100 for n in lengths]
    fields = [
        jagged_field("input_ids", ids, "int64", "int32"),
        jagged_field("routed_experts", routes, dtype, inner_shape=[layers, topk]),
        dense_field("input_lengths", np.array(lengths, dtype=np.int32), "int32"),
    ]
    tags = [
        row_tags(weight_version=1, prompt_idx=5, group_id=group_id, counts={"num_routed_experts_backfilled": 1})
        for _ in lengths
    ]
    rec = packed_record(group_id, "b", fields, tags)
    rec["_expected"] = {"routed_experts": routes}
    return rec


def media_group(group_id: str = "mm-1") -> dict:
    """Two rows: row 0 has two images (2x3 and 1x3 patches of dim 3), row 1 one (3x3)."""
    seg = {
        0: [np.arange(2 * 3 * 3, dtype=np.float32).reshape(2, 3, 3), np.full((1, 3, 3), 7, np.float32)],
        1: [np.full((3, 3, 3), -1, np.float32)],
    }
    rows = [np.concatenate(seg[0]), np.concatenate(seg[1])]
    fields = [
        jagged_field("input_ids", [np.arange(4), np.arange(2)], "int64", "int32"),
        jagged_field("pixel_values", rows, "float32"),
        dense_field("input_lengths", np.array([4, 2], np.int32), "int32"),
        object_field("extra_env_info", [{"task": "a", "ok": True}, [1, 2, None]]),
    ]
    tags = [
        row_tags(weight_version=2, prompt_idx=9, group_id=group_id, row_shapes={"pixel_values": [[2, 3, 3], [1, 3, 3]]}),
        row_tags(weight_version=2, prompt_idx=9, group_id=group_id, row_shapes={"pixel_values": [[3, 3, 3]]}),
    ]
    rec = packed_record(group_id, "b", fields, tags)
    rec["_expected"] = {"segments": seg}
    return rec


def versioned_group(group_id: str, weight_version: int, batch_id: str = "batch-7", lengths=(3, 1)) -> dict:
    """A small text group (``clean``ed) whose rows all carry ``weight_version``, in ``batch_id``."""
    rec = clean(text_group(group_id, lengths=lengths))
    for t in rec["tags"]:
        t["weight_version"] = weight_version
    rec["batch_id"] = batch_id
    return rec
