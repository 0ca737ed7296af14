"""Builders shared by the chunk tests, the twins of test/unit/chunks/chunk-fixtures.ts:
the deterministic values and set ids of docs/examples/chunks/, and header
patches that write what no writer would."""

from __future__ import annotations

import json
import struct
from pathlib import Path

CHUNKS_DIR = Path(__file__).resolve().parents[2] / "docs" / "examples" / "chunks"


def read_chunk_doc(name: str) -> dict:
    return json.loads((CHUNKS_DIR / name).read_text())


def pattern_value(size: int, seed: int) -> bytes:
    """byte i = (13*seed + 7*i) mod 251."""
    return bytes((13 * seed + 7 * i) % 251 for i in range(size))


def named_set_id(name: str) -> bytes:
    """The name's UTF-8 bytes padded with zeros to 16."""
    return name.encode().ljust(16, b"\0")


_FIELDS = {
    "magic": (0, ">B"),
    "version": (1, ">B"),
    "header_len": (2, ">H"),
    "index": (20, ">I"),
    "count": (24, ">I"),
    "total_size": (28, ">Q"),
    "payload_at": (36, ">Q"),
    "crc": (44, ">I"),
}


def patch_header(chunk: bytes, patch: dict) -> bytes:
    """A copy of ``chunk`` with header fields overwritten in place, whatever they say."""
    out = bytearray(chunk)
    for name, value in patch.items():
        at, fmt = _FIELDS[name]
        struct.pack_into(fmt, out, at, value)
    return bytes(out)
