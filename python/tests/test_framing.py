"""Confluent framing and the callable deserializer, including the negative cases."""

from __future__ import annotations

import pytest

from builders import clean, text_group
from rollout_stream import (
    DecodeError,
    FramingError,
    PackedDeserializer,
    StaticResolver,
    UnknownSchemaError,
    decode_packed,
    frame,
    parse_header,
)
from rollout_stream.encode import encode_packed_body


@pytest.fixture
def framed(packed_schema) -> bytes:
    return frame(7, encode_packed_body(clean(text_group()), packed_schema))


@pytest.fixture
def resolver(packed_schema) -> StaticResolver:
    return StaticResolver({7: packed_schema})


def test_header_is_magic_zero_and_big_endian_schema_id(framed):
    assert framed[:5] == b"\x00\x00\x00\x00\x07"
    assert parse_header(framed) == 7
    assert parse_header(frame(0x01020304, b"")) == 0x01020304


def test_decode_packed_reads_the_frame_and_records_the_schema_id(framed, resolver):
    group = decode_packed(framed, resolver, jagged="numpy")
    assert group.schema_id == 7 and group.group_id == "grp-1" and group.batch_id == "batch-7"
    assert len(group) == 4


def test_a_wrong_magic_byte_is_a_framing_error(framed, resolver):
    with pytest.raises(FramingError, match="magic byte 0x01") as e:
        decode_packed(b"\x01" + framed[1:], resolver)
    assert e.value.code == "framing"


@pytest.mark.parametrize("size", [0, 1, 4])
def test_a_value_shorter_than_the_header_is_a_framing_error(framed, resolver, size):
    with pytest.raises(FramingError, match="shorter than the 5-byte"):
        decode_packed(framed[:size], resolver)


def test_an_unknown_schema_id_is_reported_as_such(framed, resolver):
    with pytest.raises(UnknownSchemaError, match="schema id 8 is unknown") as e:
        decode_packed(b"\x00\x00\x00\x00\x08" + framed[5:], resolver)
    assert e.value.code == "unknown_schema"


@pytest.mark.parametrize("cut", [5, 6, 30, 200, -300, -1])
def test_truncated_bytes_are_decode_errors(framed, resolver, cut):
    with pytest.raises(DecodeError) as e:
        decode_packed(framed[:cut], resolver)
    assert e.value.code == "undecodable"


def test_bytes_after_the_record_are_a_decode_error(framed, resolver):
    with pytest.raises(DecodeError, match="3 bytes left"):
        decode_packed(framed + b"abc", resolver)


def test_a_writer_schema_that_is_not_packed_group_is_refused():
    other = {"type": "record", "name": "Other", "namespace": "x", "fields": [{"name": "a", "type": "int"}]}
    with pytest.raises(DecodeError, match="not dev.rolloutstream.v1.PackedGroup"):
        StaticResolver({1: other})


def test_the_deserializer_is_callable_with_a_result_hook(framed, resolver):
    seen = []
    deser = PackedDeserializer(resolver, jagged="numpy", to_result=lambda g, ctx: seen.append(ctx) or (g.group_id, len(g)))
    assert deser(framed, "ctx") == ("grp-1", 4)
    assert seen == ["ctx"]
    assert deser(None) is None  # tombstone, as confluent-kafka's deserializers do


def test_memoryview_and_bytearray_values_decode_too(framed, resolver):
    for value in (bytearray(framed), memoryview(framed)):
        assert decode_packed(value, resolver, jagged="numpy").sample_ids[0] == "grp-1_g0"
