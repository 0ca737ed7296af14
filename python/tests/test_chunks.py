"""The chunk header (rollout_stream.chunks) against the golden fixtures of
docs/examples/chunks/fixtures.json, which test/unit/chunks/chunk-format.test.ts
builds and checks too, and old readers meeting a chunk."""

from __future__ import annotations

import zlib

import pytest
from chunk_builders import read_chunk_doc

from rollout_stream.chunks import (
    CHUNK_HEADER_SIZE,
    ChunkFormatError,
    IncompleteRecordError,
    Reassembler,
    Fetched,
    encode_chunk_header,
    is_chunk,
    parse_chunk,
    split_into_chunks,
)
from rollout_stream.errors import FramingError
from rollout_stream.framing import parse_header

FIXTURES = read_chunk_doc("fixtures.json")["fixtures"]
POSITIVE = [f for f in FIXTURES if "headers" in f]
NEGATIVE = [f for f in FIXTURES if "error" in f]


def _reassemble(chunks: list[bytes]):
    r = Reassembler(0, True, max_held_bytes=1 << 20, chunk_wait_ms=1000)
    for i, c in enumerate(chunks):
        r.push(Fetched(i, c), 0)
    return r.take()


def test_the_fixtures_cover_the_positive_and_negative_cases():
    names = {f["name"] for f in FIXTURES}
    assert {"three-chunk-set", "wrong-magic", "truncated-header", "crc-mismatch", "count-1", "index-out-of-range", "version-2"} <= names


@pytest.mark.parametrize("fx", POSITIVE, ids=lambda f: f["name"])
def test_positive_fixture_parses_to_its_headers_and_reassembles_to_its_value(fx):
    chunks = [bytes.fromhex(h) for h in fx["chunks"]]
    for chunk, want in zip(chunks, fx["headers"], strict=True):
        h, payload = parse_chunk(chunk)
        got = {"set_id": h.set_id.hex(), "index": h.index, "count": h.count, "total_size": h.total_size,
               "payload_at": h.payload_at, "crc": h.crc, "header_len": h.header_len}
        assert got == want
        assert bytes(payload) == chunk[h.header_len:]
        assert is_chunk(chunk)
        if h.header_len == CHUNK_HEADER_SIZE:
            assert encode_chunk_header(h.set_id, h.index, h.count, h.total_size, h.payload_at, h.crc) == chunk[:CHUNK_HEADER_SIZE]
    (out,) = _reassemble(chunks)
    assert out.kind == "record" and bytes(out.value).hex() == fx["value"]


@pytest.mark.parametrize("fx", NEGATIVE, ids=lambda f: f["name"])
def test_negative_fixture_fails_where_it_says(fx):
    chunks = [bytes.fromhex(h) for h in fx["chunks"]]
    err = fx["error"]
    if err["at"] == "parse":
        with pytest.raises(ChunkFormatError, match=err["match"]) as e:
            parse_chunk(chunks[err["index"]])
        assert e.value.code == "undecodable"
        # A value that does not start with 0xCB is no chunk: it goes on whole, to its own decoder.
        assert [o.kind for o in _reassemble(chunks)] == ["undecodable" if is_chunk(chunks[0]) else "record"]
    else:
        (out,) = _reassemble(chunks)
        assert out.kind == "incomplete" and out.incomplete.detail == err["detail"]


def test_the_python_writer_writes_the_typescript_bytes():
    fx = POSITIVE[0]
    value = bytes.fromhex(fx["value"])
    h = fx["headers"][0]
    payload = len(bytes.fromhex(fx["chunks"][0])) - CHUNK_HEADER_SIZE
    assert split_into_chunks(value, payload, bytes.fromhex(h["set_id"])) == [bytes.fromhex(c) for c in fx["chunks"]]


def test_splitting_refuses_a_value_that_fits_and_a_payload_size_off_64():
    with pytest.raises(ValueError, match="not chunked"):
        split_into_chunks(b"x" * 300, 320, bytes(16))
    with pytest.raises(ValueError, match="multiple of 64"):
        split_into_chunks(b"x" * 300, 100, bytes(16))


def test_an_incomplete_set_raises_with_the_incomplete_record_code():
    fx = next(f for f in NEGATIVE if f["name"] == "payload-at-gap")
    (out,) = _reassemble([bytes.fromhex(h) for h in fx["chunks"]])
    e = out.incomplete.error()
    assert isinstance(e, IncompleteRecordError) and e.code == "incomplete_record" and e.details["detail"] == "inconsistent"


def test_without_verify_crc_a_crc_mismatch_passes_and_structure_is_still_checked():
    crc_bad = next(f for f in NEGATIVE if f["name"] == "crc-mismatch")
    gap = next(f for f in NEGATIVE if f["name"] == "payload-at-gap")
    for fx, want in ((crc_bad, "record"), (gap, "incomplete")):
        r = Reassembler(0, True, max_held_bytes=1 << 20, chunk_wait_ms=1000, verify_crc=False)
        for i, c in enumerate(fx["chunks"]):
            r.push(Fetched(i, bytes.fromhex(c)), 0)
        (out,) = r.take()
        assert out.kind == want, fx["name"]
    assert zlib.crc32(bytes.fromhex(POSITIVE[0]["value"])) == POSITIVE[0]["headers"][0]["crc"]


def test_an_old_reader_refuses_a_chunk_on_its_magic_byte():
    for h in POSITIVE[0]["chunks"]:
        with pytest.raises(FramingError, match="unknown magic byte 0xcb") as e:
            parse_header(bytes.fromhex(h))
        assert e.value.details["magic"] == 0xCB
