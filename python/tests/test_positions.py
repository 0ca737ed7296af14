"""Positions (SPEC §6.1) as JSON and inside a torch checkpoint; the headers; the dead-letter schema copy."""

from __future__ import annotations

import json

import pytest

from conftest import REPO_ROOT
from rollout_stream import get_position, merge_positions, put_position
from rollout_stream.dead_letters import DEAD_LETTER_SCHEMA
from rollout_stream.positions import from_offsets, to_offsets
from rollout_stream.record_meta import header_values


def test_a_position_survives_json_and_a_torch_checkpoint_unchanged(tmp_path):
    torch = pytest.importorskip("torch")
    pos = {"p.rollout.packed": {"0": 12, "3": 7}}
    assert json.loads(json.dumps(pos)) == pos
    ckpt = put_position({"step": 4, "model": {"w": torch.zeros(2)}}, pos)
    torch.save(ckpt, tmp_path / "ckpt.pt")
    back = torch.load(tmp_path / "ckpt.pt", weights_only=True)  # plain ints and strs: loads under weights_only
    assert get_position(back) == pos and back["step"] == 4
    assert get_position({"step": 1}) is None


def test_a_malformed_or_newer_checkpoint_entry_is_refused():
    with pytest.raises(ValueError, match="non-negative int"):
        put_position({}, {"t": {"0": -1}})
    with pytest.raises(ValueError, match="partition must be an integer"):
        to_offsets({"t": {"x": 1}})
    with pytest.raises(ValueError, match="format 2"):
        get_position({"rollout_stream": {"format": 2, "position": {}}})


def test_merging_positions_keeps_each_partitions_furthest_offset():
    a = {"t": {"0": 10, "1": 3}}
    b = {"t": {"1": 8, "2": 1}, "u": {"0": 4}}
    assert merge_positions([a, b, None]) == {"t": {"0": 10, "1": 8, "2": 1}, "u": {"0": 4}}
    assert from_offsets({("t", 10): 1, ("t", 2): 5}) == {"t": {"2": 5, "10": 1}}


def test_headers_give_the_weight_version_and_batch_id_or_none():
    assert header_values([("batch_id", b"step-3"), ("weight_version", b"17"), ("x", None)]) == (17, "step-3")
    assert header_values(None) == (None, None)
    assert header_values([("weight_version", b"seven"), ("batch_id", b"\xff")]) == (None, None)


def test_the_embedded_dead_letter_schema_is_schemas_dead_letter_avsc():
    assert DEAD_LETTER_SCHEMA == json.loads((REPO_ROOT / "schemas" / "dead-letter.avsc").read_text())
