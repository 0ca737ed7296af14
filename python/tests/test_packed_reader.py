"""The hand-written PackedGroup reader gives exactly what fastavro gives, or a DecodeError."""

from __future__ import annotations

import copy
import json

import fastavro
import numpy as np
import pytest
import torch

from builders import clean, media_group, routed_group, text_group
from rollout_stream import DecodeError, decode_packed_body
from rollout_stream.avro_body import read_parts, read_record
from rollout_stream.codec import record_parts
from rollout_stream.encode import dense_field, encode_packed_body, jagged_field, packed_record, row_tags
from rollout_stream.jagged_tensor import nested_from_jagged
from rollout_stream.packed_reader import known_layout, read_packed_group

GROUPS = {
    "text-narrow": lambda: text_group(narrow=True),
    "text-exact": lambda: text_group(narrow=False),
    "routed": lambda: routed_group(),
    "media+object": lambda: media_group(),
    "empty-rows": lambda: text_group(lengths=(0, 0)),
}


def comparable(parts):
    group_id, batch_id, sample_ids, tags, fields = parts
    return (
        group_id,
        batch_id,
        list(sample_ids),
        tags,
        [(*f[:4], list(f[4]), None if f[5] is None else bytes(f[5]), bytes(f[6])) for f in fields],
    )


def fastavro_parts(value, start, schema):
    return record_parts(read_record(value, start, schema))


@pytest.mark.parametrize("name", list(GROUPS))
@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview], ids=["bytes", "bytearray", "memoryview"])
def test_hand_reader_equals_fastavro_on_every_built_group(packed_schema, name, wrap):
    body = encode_packed_body(clean(GROUPS[name]()), packed_schema)
    value = wrap(b"\0" * 5 + body)
    layout = known_layout(packed_schema)
    assert layout == (("jagged", "dense"), True)
    assert comparable(read_packed_group(value, 5, *layout)) == comparable(fastavro_parts(value, 5, packed_schema))


def test_tensor_bytes_come_back_as_views_of_the_message(packed_schema):
    body = encode_packed_body(clean(text_group(lengths=(300, 200))), packed_schema)
    message = np.frombuffer(body, np.uint8)
    for f in read_packed_group(body, 0, ("jagged", "dense"))[4]:
        assert isinstance(f[6], memoryview) and np.shares_memory(np.frombuffer(f[6], np.uint8), message)


# --- Avro blocks the fastavro writer never produces: several, negative counts --------------


def zz(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def text(s: str) -> bytes:
    b = s.encode()
    return zz(len(b)) + b


def blocks(items: list[bytes]) -> bytes:
    """Items as a negative-count block (with its byte size), a positive one, then the end."""
    half = len(items) // 2
    first, rest = b"".join(items[:half]), b"".join(items[half:])
    out = b""
    if half:
        out += zz(-half) + zz(len(first)) + first
    if len(items) > half:
        out += zz(len(items) - half) + rest
    return out + zz(0)


def hand_encode(rec: dict) -> bytes:
    def tag(t):
        shapes = [text(k) + blocks([blocks([zz(d) for d in s]) for s in v]) for k, v in t["row_shapes"].items()]
        return (
            zz(t["weight_version"]) + zz(t["prompt_idx"]) + text(t["group_id"])
            + b"".join(zz(t[k]) for k in ("num_invalid_tool_calls", "num_malformed_thinking",
                                          "num_assistant_messages", "num_routed_experts_backfilled"))
            + blocks(shapes)
        )

    def field(f):
        offsets = zz(0) if f["offsets"] is None else zz(1) + zz(len(f["offsets"])) + f["offsets"]
        return (
            text(f["name"]) + text(f["dtype"]) + text(f["wire_dtype"])
            + zz(["jagged", "dense"].index(f["layout"])) + blocks([zz(d) for d in f["shape"]])
            + offsets + zz(3) + b"\0\0\0" + zz(len(f["values"])) + f["values"]  # a 3-byte pad
        )

    return (
        text(rec["group_id"]) + text(rec["batch_id"]) + blocks([text(s) for s in rec["sample_ids"]])
        + blocks([tag(t) for t in rec["tags"]]) + blocks([field(f) for f in rec["fields"]])
    )


@pytest.mark.parametrize("name", ["media+object", "routed"])
def test_split_and_negative_count_blocks_read_like_fastavro(packed_schema, name):
    rec = clean(GROUPS[name]())
    rec["tags"][0]["weight_version"] = 2**40  # multi-byte varints too
    rec["tags"][0]["prompt_idx"] = -3
    body = hand_encode(rec)
    assert body != encode_packed_body(rec, packed_schema)  # really another encoding
    got = comparable(read_packed_group(body, 0, ("jagged", "dense")))
    assert got == comparable(fastavro_parts(body, 0, packed_schema))
    assert got[3][0]["weight_version"] == 2**40 and got[3][0]["prompt_idx"] == -3


# --- other writer schemas go through fastavro ------------------------------------------------


def test_a_writer_schema_with_an_added_field_is_read_by_fastavro(packed_schema_text):
    raw = json.loads(packed_schema_text)
    field_rec = raw["fields"][4]["type"]["items"]
    field_rec["fields"].append({"name": "compression", "type": "string", "default": "none"})
    evolved = fastavro.parse_schema(raw)
    assert known_layout(evolved) is None
    rec = clean(text_group())
    for f in rec["fields"]:
        f["compression"] = "none"
    body = encode_packed_body(rec, evolved)
    expected = decode_packed_body(encode_packed_body(clean(text_group()), fastavro.parse_schema(json.loads(packed_schema_text))), packed_schema_text)
    got = decode_packed_body(body, evolved, jagged="torch")
    assert got.sample_ids == expected.sample_ids and got.tags == expected.tags
    for k, v in expected.fields.items():
        assert torch.equal(torch.cat(got.fields[k].unbind()) if v.is_nested else got.fields[k],
                           torch.cat(v.unbind()) if v.is_nested else v), k


def test_a_renamed_enum_symbol_order_is_taken_from_the_writer(packed_schema_text):
    raw = json.loads(packed_schema_text)
    layout = raw["fields"][4]["type"]["items"]["fields"][3]["type"]
    layout["symbols"] = ["dense", "jagged"]
    schema = fastavro.parse_schema(raw)
    assert known_layout(schema) == (("dense", "jagged"), True)
    rec = clean(text_group())
    got = decode_packed_body(encode_packed_body(rec, schema), schema, jagged="numpy")
    assert got.field_info["input_ids"]["layout"] == "jagged" and got.field_info["input_lengths"]["layout"] == "dense"


# --- malformed bodies ----------------------------------------------------------------------------


def small_body(packed_schema) -> bytes:
    return encode_packed_body(clean(media_group()), packed_schema)


def test_every_truncation_is_a_decode_error(packed_schema):
    body = small_body(packed_schema)
    for cut in range(len(body)):
        with pytest.raises(DecodeError):
            read_parts(body[:cut], 0, packed_schema)


def test_trailing_bytes_are_a_decode_error(packed_schema):
    with pytest.raises(DecodeError, match="1 bytes left after the Avro record"):
        decode_packed_body(small_body(packed_schema) + b"\0", packed_schema)


def test_bad_utf8_negative_lengths_and_bad_union_branches_are_decode_errors(packed_schema):
    rec = clean(text_group(group_id="gg"))
    body = encode_packed_body(rec, packed_schema)
    with pytest.raises(DecodeError, match="utf-8"):
        read_parts(body.replace(b"gg", b"\xff\xfe", 1), 0, packed_schema)
    with pytest.raises(DecodeError, match="negative length"):
        read_parts(zz(-2) + body[1:], 0, packed_schema)
    bad = copy.deepcopy(rec)
    bad["fields"] = [dense_field("x", np.zeros(2, np.float32), "float32")]
    b = encode_packed_body(bad, packed_schema)
    at = b.rfind(b"\x00" + zz(0) + zz(8))  # offsets: null branch, an empty pad, then 8 value bytes
    with pytest.raises(DecodeError, match="union branch"):
        read_parts(b[:at] + b"\x04" + b[at + 1 :], 0, packed_schema)


# --- the fast nested tensor constructor -------------------------------------------------------


def test_fast_nested_tensors_equal_the_public_constructor_and_share_the_ragged_dim():
    offsets = torch.tensor([0, 2, 2, 5])
    ids = torch.arange(5)
    routes = torch.arange(30, dtype=torch.int16).reshape(5, 3, 2)
    a, b = nested_from_jagged(ids, offsets), nested_from_jagged(routes, offsets)
    ref = torch.nested.nested_tensor_from_jagged(ids, offsets)
    assert type(a) is type(ref) and a.layout == torch.jagged and a.shape == ref.shape
    assert a.shape[1] == b.shape[1]  # one ragged dim
    assert b.shape[2:] == (3, 2) and b.dtype == torch.int16
    assert all(torch.equal(x, y) for x, y in zip(a.unbind(), ref.unbind()))
    assert torch.equal((a * a).values(), ids * ids)  # ops work and keep the structure
    assert a.values().data_ptr() == ids.data_ptr() and a.offsets() is offsets


def test_copied_fields_are_aligned_separate_slices_and_views_stay_views(packed_schema):
    rec = clean(text_group("ggg", lengths=(600, 700), narrow=True))
    body = encode_packed_body(rec, packed_schema)
    _, f, _ = decode_packed_body(body, packed_schema, jagged="torch")
    tensors = {k: (v.values() if v.is_nested else v) for k, v in f.items()}
    for k, t in tensors.items():
        assert t.data_ptr() % t.element_size() == 0, k
        assert t.untyped_storage().nbytes() == t.numel() * t.element_size(), k  # pickles only itself
    ids, mask = tensors["input_ids"], tensors["token_mask"]
    mask.fill_(7)
    assert not (ids == 7).all()
    assert ids.dtype == mask.dtype == torch.int64


def test_a_group_whose_only_widened_field_is_empty_decodes(packed_schema):
    rec = packed_record(
        "g", "b", [jagged_field("input_ids", [np.zeros(0, np.int64)] * 2, "int64", "int32")],
        [row_tags(weight_version=0, prompt_idx=0, group_id="g")] * 2,
    )
    for mode in ("numpy", "torch"):
        _, f, _ = decode_packed_body(encode_packed_body(rec, packed_schema), packed_schema, jagged=mode)
        values = f["input_ids"].values if mode == "numpy" else f["input_ids"].values()
        assert values.dtype in (np.int64, torch.int64) and len(values) == 0
