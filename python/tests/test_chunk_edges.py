"""The readers that look at records without reassembling them: the re-run read-back
(gym/published.py) takes a chunked row's leading fields from its first chunk and
passes the others over; backpressure counts a chunked group once, at its first chunk."""

from __future__ import annotations

import io
import os

import fastavro
import pytest
from test_publisher_validation import good_row

from rollout_stream import row_encoder, row_input
from rollout_stream.chunks import split_into_chunks
from rollout_stream.dead_letters import DEAD_LETTER_SCHEMA
from rollout_stream.framing import frame
from rollout_stream.gym.backpressure import dead_letter_reason, is_data_record
from rollout_stream.gym.published import leading_bytes, row_identity


def row_value(group_id: str) -> bytes:
    row = good_row() | {"group_id": group_id, "row_index": 7}
    return row_encoder.header(3) + b"".join(row_encoder.row_parts(row_input.row(row)))


def test_a_chunked_row_s_identity_is_read_from_its_first_chunk_and_the_rest_pass_over():
    value = row_value("g-chunked")
    chunks = split_into_chunks(value, 64, os.urandom(16))
    assert len(chunks) > 2
    heads = [leading_bytes(c) for c in chunks]
    assert heads[1:] == [None] * (len(chunks) - 1)
    assert row_identity(heads[0]) == ("b1", "g-chunked", 7) == row_identity(leading_bytes(value))
    with pytest.raises(ValueError, match="unknown chunk version"):
        leading_bytes(bytes([0xCB, 2]) + chunks[0][2:])


def test_backpressure_counts_a_chunked_group_once_and_reads_a_chunked_dead_letter_s_reason():
    value = b"\x00" + bytes(4) + os.urandom(5000)
    chunks = split_into_chunks(value, 1024, os.urandom(16))
    assert [is_data_record(c) for c in chunks] == [True] + [False] * (len(chunks) - 1)
    assert is_data_record(value) and is_data_record(b"\xcb\x09broken")
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(DEAD_LETTER_SCHEMA), {
        "reason": "incomplete_group", "message": "m" * 3000, "stage": "accumulate", "group_id": "g", "batch_id": "b",
        "row_indices": [], "missing_row_indices": [], "records": [], "produced_at": 1})
    dl = frame(9, buf.getvalue())
    dl_chunks = split_into_chunks(dl, 1024, os.urandom(16))
    assert [dead_letter_reason(c) for c in dl_chunks] == ["incomplete_group"] + [None] * (len(dl_chunks) - 1)
