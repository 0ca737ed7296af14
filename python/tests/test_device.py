"""device=: the staged (pinned + async copy) decode path and device-side padding.

On a machine without CUDA the device code path runs on the host through
``Placement(torch.device("cpu"), pin_memory=False)``: same widening into a
fresh host buffer, same ``.to(device, non_blocking=True)``, same nested
tensors with cached min/max row lengths, same scatter padding. What only a
GPU exercises (pinned allocation, the real async copy, kernels on CUDA) is in
the ``skipif(not torch.cuda.is_available())`` tests at the end, which are
extra, not the proof.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from builders import clean, media_group, routed_group, text_group
from rollout_stream import (
    DeviceUnavailableError,
    JaggedArray,
    PackedDeserializer,
    decode_packed,
    decode_packed_body,
    feed,
    fields_to,
    materialize,
)
from rollout_stream.devices import Placement, placement
from rollout_stream.encode import encode_packed_body, load_packed_schema
from rollout_stream.framing import frame, parse_header
from rollout_stream.materialize import _pad_numpy, _pad_torch, pad_jagged_scatter
from rollout_stream.registry import StaticResolver

CPU_PATH = Placement(torch.device("cpu"), pin_memory=False)
VECTORS = Path(__file__).resolve().parents[2] / "test" / "vectors"
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised where CUDA is missing")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (extra check, not the CPU proof)")


def vector_values() -> list[tuple[str, bytes]]:
    return [(p.stem, p.read_bytes()) for p in sorted(VECTORS.glob("*.avro"))]


def vector_resolver(values) -> StaticResolver:
    own = VECTORS / "packed.avsc"
    schema = load_packed_schema(own if own.exists() else None)
    return StaticResolver({parse_header(v): schema for _, v in values})


def assert_same_group(a, b) -> None:
    """Bit-identical groups: ids, tags, field names, kinds, dtypes, shapes, offsets, values."""
    assert (a.group_id, a.batch_id, a.sample_ids, a.tags, a.field_info) == (b.group_id, b.batch_id, b.sample_ids, b.tags, b.field_info)
    assert list(a.fields) == list(b.fields)
    for name in a.fields:
        assert_same_value(a.fields[name], b.fields[name], name)


def assert_same_value(x, y, name="") -> None:
    if isinstance(x, np.ndarray) and x.dtype == object:
        assert isinstance(y, np.ndarray) and y.dtype == object and list(x) == list(y), name
        return
    assert getattr(x, "is_nested", False) == getattr(y, "is_nested", False), name
    if getattr(x, "is_nested", False):
        assert x.dtype == y.dtype and x.values().shape == y.values().shape, name
        assert torch.equal(x.offsets().cpu(), y.offsets().cpu()), name
        assert torch.equal(x.values().cpu(), y.values().cpu()), name  # exact, NaN-free payloads
        return
    assert x.dtype == y.dtype and x.shape == y.shape, name
    assert torch.equal(torch.as_tensor(x).cpu(), torch.as_tensor(y).cpu()), name


# --- the staged decode path equals the default one --------------------------------------


def test_every_shared_vector_decodes_identically_through_the_device_path():
    values = vector_values()
    assert values, f"no shared vectors in {VECTORS}"
    resolver = vector_resolver(values)
    for name, v in values:
        default = decode_packed(v, resolver)
        staged = decode_packed(v, resolver, device=CPU_PATH)
        assert_same_group(default, staged)
        as_cpu = PackedDeserializer(resolver, device="cpu").decode(v)
        assert_same_group(default, as_cpu)


@pytest.mark.parametrize(
    "rec",
    [text_group(lengths=(5, 3, 0, 7)), text_group(narrow=False), routed_group(), media_group()],
    ids=["narrow-wire", "exact-wire", "routed-experts", "media"],
)
def test_built_groups_decode_identically_through_the_device_path(packed_schema, rec):
    body = encode_packed_body(clean(rec), packed_schema)
    default = decode_packed_body(body, packed_schema)
    staged = decode_packed_body(body, packed_schema, device=CPU_PATH)
    assert_same_group(default, staged)


def test_device_path_keeps_one_ragged_dim_and_caches_row_lengths(packed_schema):
    body = encode_packed_body(clean(text_group(lengths=(5, 3, 0, 7))), packed_schema)
    f = decode_packed_body(body, packed_schema, device=CPU_PATH).fields
    assert f["input_ids"].offsets() is f["token_mask"].offsets()
    assert torch.equal((f["input_ids"] * f["token_mask"]).values(), f["input_ids"].values() * f["token_mask"].values())
    assert f["input_ids"]._metadata_cache.keys() >= {"min_seqlen", "max_seqlen"}
    assert (f["input_ids"]._min_seqlen, f["input_ids"]._max_seqlen) == (0, 7)


def test_device_cpu_is_the_default_path_exactly(packed_schema):
    """device='cpu' resolves to no device handling: the zero-copy views of today."""
    assert placement("cpu") is None and placement(None) is None and placement(torch.device("cpu")) is None
    body = bytearray(encode_packed_body(clean(text_group(narrow=False)), packed_schema))
    base = np.frombuffer(body, np.uint8).ctypes.data

    def views(fields):  # which tensors are zero-copy views of the message bytes
        out = {}
        for k, v in fields.items():
            t = v.values() if getattr(v, "is_nested", False) else v
            if isinstance(t, torch.Tensor):
                out[k] = base <= t.data_ptr() < base + len(body)
        return out

    default = views(decode_packed_body(body, packed_schema).fields)
    assert views(decode_packed_body(body, packed_schema, device="cpu").fields) == default
    assert not any(views(decode_packed_body(body, packed_schema, device=CPU_PATH).fields).values())
    fields = {"x": torch.arange(3)}
    assert fields_to(fields, "cpu") is fields and fields_to(fields, None) is fields


# --- materialize: device implementation equals the existing one ---------------------------


def _jagged_cases(packed_schema):
    text = decode_packed_body(encode_packed_body(clean(text_group(lengths=(2, 0, 3))), packed_schema), packed_schema)
    moe = decode_packed_body(encode_packed_body(clean(routed_group(lengths=(4, 0, 6), layers=3, topk=2)), packed_schema), packed_schema)
    return text, moe


@pytest.mark.parametrize("pad_to_seqlen", [0, 2, 6, 11])
def test_scatter_padding_equals_the_row_loop_and_numpy(packed_schema, pad_to_seqlen):
    text, moe = _jagged_cases(packed_schema)
    pads = {"input_ids": -7, "generation_logprobs": 0.5, "token_mask": 1, "routed_experts": -1}
    for group in (text, moe):
        for name, nt in group.fields.items():
            if not getattr(nt, "is_nested", False):
                continue
            pad = pads.get(name, 0)
            want = _pad_torch(nt, pad, pad_to_seqlen)
            got = pad_jagged_scatter(nt, pad, pad_to_seqlen)
            assert got.dtype == want.dtype and got.shape == want.shape, name
            assert torch.equal(got, want), name
            ja = JaggedArray(nt.values().numpy(), nt.offsets().numpy())
            np.testing.assert_array_equal(_pad_numpy(ja, pad, pad_to_seqlen), got.numpy())
    re_ = moe.fields["routed_experts"]
    out = pad_jagged_scatter(re_, -1)
    assert tuple(out.shape) == (3, 6, 3, 2) and out.dtype == torch.int16  # [N, max_len, layers, topk]
    assert (out[1] == -1).all() and (out[0, 4:] == -1).all() and torch.equal(out[2], re_.values()[4:10])


def test_scatter_padding_of_bool_and_all_empty_rows():
    offsets = torch.tensor([0, 0, 0])
    empty = torch.nested.nested_tensor_from_jagged(torch.zeros(0, dtype=torch.bool), offsets)
    assert pad_jagged_scatter(empty, True).shape == (2, 0)
    assert torch.equal(pad_jagged_scatter(empty, True, 3), torch.ones(2, 3, dtype=torch.bool))
    nt = torch.nested.nested_tensor_from_jagged(torch.tensor([True, False, True]), torch.tensor([0, 1, 3]))
    assert torch.equal(pad_jagged_scatter(nt, False, 4), _pad_torch(nt, False, 4))


@pytest.mark.parametrize("mode", ["torch", "numpy"])
def test_materialize_through_the_device_path_equals_materialize(packed_schema, mode):
    _, moe = _jagged_cases(packed_schema)
    body = encode_packed_body(clean(text_group(lengths=(2, 0, 3))), packed_schema)
    fields = decode_packed_body(body, packed_schema, jagged=mode).fields
    for f in (fields, moe.fields):
        want = materialize(f, {"input_ids": 9, "routed_experts": -1}, pad_to_seqlen=5)
        got = materialize(f, {"input_ids": 9, "routed_experts": -1}, pad_to_seqlen=5, device=CPU_PATH)
        assert list(got) == list(want)
        for k in want:
            assert_same_value(torch.as_tensor(want[k]) if isinstance(want[k], np.ndarray) and want[k].dtype != object else want[k],
                              got[k], k)
    same = materialize(fields, device="cpu")  # device='cpu' is today's materialize: numpy stays numpy
    assert type(same["input_ids"]) is type(materialize(fields)["input_ids"])
    assert same["total_reward"] is fields["total_reward"]


def test_fields_to_turns_numpy_fields_into_device_tensors_and_keeps_objects(packed_schema):
    g = decode_packed_body(encode_packed_body(clean(media_group()), packed_schema), packed_schema, jagged="numpy")
    moved = fields_to(g.fields, CPU_PATH)
    for name, val in g.fields.items():
        if isinstance(val, JaggedArray):
            assert moved[name].is_nested and np.array_equal(moved[name].values().numpy(), val.values)
        elif val.dtype == object:
            assert moved[name] is val
        else:
            assert isinstance(moved[name], torch.Tensor) and np.array_equal(moved[name].numpy(), val)


def test_feed_moves_each_call_to_the_device(packed_schema):
    from test_feed_unit import FakeConsumer, groups

    consumer = FakeConsumer(groups(packed_schema, 3, mode="torch"))
    seen = []
    stats = feed(consumer, lambda s, f, t: seen.append(f), max_groups_per_call=2, stop_after=3, poll_timeout=0, device=CPU_PATH)
    assert stats.groups == 3 and len(seen) == 2
    assert all(v.is_nested for v in (seen[0]["input_ids"], seen[1]["token_mask"]))
    for f in seen:  # merged or not, fields with equal offsets keep one ragged dim
        assert f["input_ids"].offsets() is f["token_mask"].offsets()
        assert (f["input_ids"] * f["token_mask"]).is_nested


# --- errors --------------------------------------------------------------------------------


@no_cuda
def test_cuda_without_cuda_is_a_clear_error_everywhere(packed_schema):
    body = encode_packed_body(clean(text_group()), packed_schema)
    for call in (
        lambda: decode_packed_body(body, packed_schema, device="cuda"),
        lambda: PackedDeserializer(StaticResolver({1: packed_schema}), device="cuda"),
        lambda: materialize({}, device="cuda:0"),
        lambda: fields_to({}, torch.device("cuda")),
        lambda: feed(None, print, device="cuda"),  # before anything is read
    ):
        with pytest.raises(DeviceUnavailableError, match="CUDA is not available") as e:
            call()
        assert e.value.code == "device_unavailable"


def test_bad_devices_and_numpy_mode_with_a_device_are_value_errors(packed_schema):
    body = encode_packed_body(clean(text_group()), packed_schema)
    for dev in ("meta", "not-a-device"):
        with pytest.raises(ValueError, match="device"):
            decode_packed_body(body, packed_schema, device=dev)
    with pytest.raises(ValueError, match="jagged='auto' or 'torch'"):
        decode_packed_body(body, packed_schema, jagged="numpy", device=CPU_PATH)


# --- bench --device cpu ----------------------------------------------------------------------


@pytest.mark.parametrize("source", ["records", "synth"])
def test_device_bench_on_cpu_ends_with_the_ratio_line(source, capsys):
    from rollout_stream.cli import main

    rc = main(["bench", "--device", "cpu", "--source", source, "--groups", "1", "--rows", "3",
               "--min-tokens", "16", "--max-tokens", "64", "--repeat", "1", "--routed-experts", "2x2"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("device: CPU")
    assert any(re.search(r"^materialize .* GB/s .* ratio", l) for l in lines)
    assert re.fullmatch(r"ratio gpu-materialize/copy: \d+\.\d+", lines[-1])


def test_cli_defaults_match_the_library():
    from rollout_stream import cli, consumer, registry

    assert cli.DEFAULT_BROKERS == consumer.DEFAULT_BROKERS and cli.DEFAULT_REGISTRY_URL == registry.DEFAULT_REGISTRY_URL


# --- CUDA only (extra; skipped where there is no GPU) ----------------------------------------


@needs_cuda
def test_cuda_decode_equals_the_cpu_decode_and_materialize_on_gpu():
    values = vector_values()
    resolver = vector_resolver(values)
    for _, v in values:
        host = decode_packed(v, resolver)
        dev = decode_packed(v, resolver, device="cuda")
        torch.cuda.synchronize()
        assert_same_group(host, dev)
        for val in dev.fields.values():
            if isinstance(val, torch.Tensor):
                assert val.device.type == "cuda"
        want = materialize(host.fields, {"input_ids": 5}, pad_to_seqlen=64)
        got = materialize(dev.fields, {"input_ids": 5}, pad_to_seqlen=64)
        got2 = materialize(host.fields, {"input_ids": 5}, pad_to_seqlen=64, device="cuda")
        for k in want:
            assert_same_value(want[k], got[k], k)
            assert_same_value(want[k], got2[k], k)


@needs_cuda
def test_cuda_staging_buffers_are_pinned():
    from rollout_stream.devices import host_buffer

    assert host_buffer((4,), torch.int64, placement("cuda")).is_pinned()


@needs_cuda
def test_device_bench_on_cuda_runs():
    out = subprocess.run(
        [sys.executable, "-m", "rollout_stream", "bench", "--device", "cuda", "--groups", "1", "--rows", "4",
         "--min-tokens", "64", "--max-tokens", "256", "--repeat", "2", "--routed-experts", "4x2"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert re.fullmatch(r"ratio gpu-materialize/copy: \d+\.\d+", out.stdout.strip().splitlines()[-1])
