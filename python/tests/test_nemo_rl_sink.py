"""DataPlaneSink against a data plane that behaves as NeMo-RL's clients do.

NeMo-RL is not installed here, so the client below is written from its code
(NVIDIA-NeMo/RL at main, 2026-08): the ``DataPlaneClient`` methods and
argument order of ``nemo_rl/data_plane/interfaces.py``, ``KVBatchMeta``'s
rule that tags align 1:1 with sample ids, and the checks of its two
clients: the in-memory one (``adapters/noop.py``: every leaf, walked by key
and again row by row, must be a ``torch.Tensor``; the partition must have
been registered; rows are stored as clones) and the TransferQueue one
(``adapters/transfer_queue.py``: ``fields.detach()``, ``NonTensorStack``
leaves pass, tags copied with ``dict(tag)``; on the ``mooncake_cpu``
backend only ``input_lengths``/``total_reward``/``sample_mask`` may be
dense 1-D, from ``schema.PROMOTE_1D_FIELDS``).

What the client must receive for a group is what ``pack_payload``
(``nemo_rl/experience/payload.py``, with ``codec.pack_jagged_fields`` and
``column_io.TOKEN_ALIGNED_FIELDS``) documents for the same group: sample
ids ``{group_id}_g{i}``; the token-aligned columns of at least two
dimensions cut row by row to ``input_lengths`` into ``torch.jagged`` nested
tensors, every other column rectangular as given; ``record_to_train_batch``'s
dtypes; a tag per row carrying an int ``weight_version``. The expectation is
built here from each shared vector's JSON form by those rules (padded batch,
then the cut), not from the decoder.
"""

from __future__ import annotations

import json
import sys
import types
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tensordict = pytest.importorskip("tensordict")
from tensordict import NonTensorStack, TensorDict  # noqa: E402

from conftest import REPO_ROOT  # noqa: E402
from rollout_stream import JaggedArray, decode_packed_body, feed  # noqa: E402
from rollout_stream.encode import load_packed_schema  # noqa: E402
from rollout_stream.json_form import field_from_json  # noqa: E402
from rollout_stream.nemo_rl import PAYLOAD_FIELDS, DataPlaneFieldError, DataPlaneSink  # noqa: E402
from test_feed_unit import FakeConsumer  # noqa: E402

VECTORS = REPO_ROOT / "test" / "vectors"
SCHEMA = load_packed_schema(VECTORS / "packed.avsc")
VECTOR_NAMES = sorted(p.stem for p in VECTORS.glob("*.avro") if p.with_suffix(".json").exists())

# record_to_train_batch's columns and dtypes (routed_experts: the producer's own, int16 by default).
NEMO_DTYPES = {
    "input_ids": torch.int64,
    "input_lengths": torch.int32,
    "generation_logprobs": torch.float32,
    "token_mask": torch.int64,
    "sample_mask": torch.float32,
    "prompt_ids_for_adv": torch.int64,
    "total_reward": torch.float32,
    "routed_experts": torch.int16,
}
# column_io.TOKEN_ALIGNED_FIELDS: the names pack_jagged_fields cuts per row.
TOKEN_ALIGNED = {
    "input_ids", "generation_logprobs", "prev_logprobs", "reference_policy_logprobs",
    "advantages", "token_mask", "sample_mask", "routed_experts",
}
PROMOTE_1D_FIELDS = {"input_lengths", "total_reward", "sample_mask"}


# ── a data plane with NeMo-RL's interface and checks ─────────────────────


@dataclass
class KVBatchMeta:
    partition_id: str
    task_name: str | None
    sample_ids: list[str]
    fields: list[str] | None = None
    sequence_lengths: list[int] | None = None
    extra_info: dict[str, Any] = field(default_factory=dict)
    tags: list[dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        if self.tags is not None and len(self.tags) != len(self.sample_ids):
            raise ValueError(f"KVBatchMeta: {len(self.tags)} tags for {len(self.sample_ids)} sample_ids")


class DataPlaneClient(ABC):
    """NeMo-RL's boundary, method for method (signatures of interfaces.py)."""

    @abstractmethod
    def register_partition(self, partition_id, fields, num_samples, consumer_tasks, grpo_group_size=None, enums=None): ...
    @abstractmethod
    def claim_meta(self, partition_id, task_name, required_fields, batch_size, dp_rank=None, blocking=True, timeout_s=60.0): ...
    @abstractmethod
    def get_data(self, meta, select_fields=None): ...
    @abstractmethod
    def check_consumption_status(self, partition_id, task_names): ...
    @abstractmethod
    def put_samples(self, sample_ids, partition_id, fields=None, tags=None): ...
    @abstractmethod
    def get_samples(self, sample_ids, partition_id, select_fields): ...
    @abstractmethod
    def clear_samples(self, sample_ids, partition_id): ...
    @abstractmethod
    def close(self): ...


class InMemoryDataPlane(DataPlaneClient):
    """Stores rows in memory; ``adapter`` picks whose checks apply to ``put_samples``.

    ``"noop"``: NoOpDataPlaneClient's (registered partition, tensor leaves only,
    rows cloned). ``"transfer_queue"``: TQDataPlaneClient's (detach, non-tensor
    stacks pass; ``backend="mooncake_cpu"`` adds the dense 1-D rule).
    """

    def __init__(self, adapter: str = "noop", backend: str = "simple") -> None:
        self.adapter, self.backend = adapter, backend
        self.partitions: dict[str, dict[str, Any]] = {}
        self.received: list[tuple[list[str], str, Any, list[dict[str, Any]] | None]] = []

    def register_partition(self, partition_id, fields, num_samples, consumer_tasks, grpo_group_size=None, enums=None):
        self.partitions[partition_id] = {"rows": {}, "tags": {}, "consumed": {t: set() for t in consumer_tasks}}

    def claim_meta(self, partition_id, task_name, required_fields, batch_size, dp_rank=None, blocking=True, timeout_s=60.0):
        part = self.partitions[partition_id]
        ready = [k for k, row in part["rows"].items() if k not in part["consumed"][task_name] and all(f in row for f in required_fields)]
        ready = ready[:batch_size]
        part["consumed"][task_name].update(ready)
        tags = [dict(part["tags"].get(k, {})) for k in ready]
        # As the TransferQueue adapter does: sequence lengths come from an input_lengths tag when there is one.
        lengths = [int(t.get("input_lengths", 0)) for t in tags] if any("input_lengths" in t for t in tags) else None
        return KVBatchMeta(partition_id, task_name, ready, list(required_fields), sequence_lengths=lengths, tags=tags)

    def get_data(self, meta, select_fields=None):
        names = select_fields if select_fields is not None else meta.fields
        if names is None:
            raise ValueError("get_data needs select_fields or meta.fields")
        return self.get_samples(meta.sample_ids, meta.partition_id, list(names))

    def check_consumption_status(self, partition_id, task_names):
        part = self.partitions[partition_id]
        return all(len(part["consumed"][t]) >= len(part["rows"]) for t in task_names)

    def put_samples(self, sample_ids, partition_id, fields=None, tags=None):
        if fields is not None and not isinstance(fields, TensorDict):
            raise TypeError(f"fields must be a TensorDict, not {type(fields).__name__}")
        if self.adapter == "noop":
            part = self.partitions[partition_id]  # the in-memory client needs register_partition first
            if fields is not None:
                self._tensor_leaves_only(fields)
        else:
            part = self.partitions.setdefault(partition_id, {"rows": {}, "tags": {}, "consumed": {}})
            if fields is not None:
                fields = fields.detach()
                if self.backend == "mooncake_cpu":
                    self._mooncake_1d(fields)
        if fields is not None:
            for i, sid in enumerate(sample_ids):
                row = part["rows"].setdefault(sid, {})
                for name in fields.keys():
                    val = fields[name][i]
                    row[name] = val.detach().clone() if isinstance(val, torch.Tensor) else val
        copied = None if tags is None else [dict(t) for t in tags]
        if copied is not None:
            for sid, t in zip(sample_ids, copied):
                part["tags"].setdefault(sid, {}).update(t)
        self.received.append((list(sample_ids), partition_id, fields, copied))
        return KVBatchMeta(partition_id, None, list(sample_ids), list(fields.keys()) if fields is not None else None, tags=copied)

    @staticmethod
    def _tensor_leaves_only(td: TensorDict) -> None:
        # By key over the tensor leaves, then row by row: a NonTensorData / NonTensorStack
        # leaf is missing from keys(leaves_only=True) in some tensordict versions.
        bad = [k for k in td.keys(include_nested=True, leaves_only=True) if not isinstance(td.get(k), torch.Tensor)]
        bad += [k for k in td.keys() if k not in bad and any(not isinstance(td[k][i], torch.Tensor) for i in range(td.batch_size[0]))]
        if bad:
            raise TypeError(f"put_samples received non-tensor leaves: {bad}")

    @staticmethod
    def _mooncake_1d(td: TensorDict) -> None:
        for k in td.keys():
            v = td.get(k)
            dense_1d = isinstance(v, torch.Tensor) and not v.is_nested and v.dim() == 1
            if k in PROMOTE_1D_FIELDS and not dense_1d:
                raise ValueError(f"Mooncake scalar field {k!r} must be a dense 1D tensor")
            if k not in PROMOTE_1D_FIELDS and dense_1d:
                raise ValueError(f"Mooncake field {k!r} is a dense 1D tensor but is not declared in PROMOTE_1D_FIELDS")

    def get_samples(self, sample_ids, partition_id, select_fields):
        rows = self.partitions[partition_id]["rows"]
        out = {}
        for f in select_fields:
            vals = [rows[s][f] for s in sample_ids]
            same = all(v.shape == vals[0].shape for v in vals)
            out[f] = torch.stack(vals) if same else torch.nested.as_nested_tensor(vals, layout=torch.jagged)
        return TensorDict(out, batch_size=[len(sample_ids)])

    def clear_samples(self, sample_ids, partition_id):
        part = self.partitions.get(partition_id)
        for sid in list(part["rows"]) if sample_ids is None else sample_ids:
            part["rows"].pop(sid, None)
            part["tags"].pop(sid, None)

    def close(self):
        self.partitions.clear()


def registered(adapter: str = "noop", backend: str = "simple", partition: str = "rollout_data") -> InMemoryDataPlane:
    client = InMemoryDataPlane(adapter, backend)
    client.register_partition(partition, list(PAYLOAD_FIELDS), 64, ["train"])
    return client


# ── the vectors and what pack_payload makes of them ───────────────────────


def vector(name: str, mode: str):
    doc = json.loads((VECTORS / f"{name}.json").read_text())["packed"]
    group = decode_packed_body(memoryview((VECTORS / f"{name}.avro").read_bytes())[5:], SCHEMA, jagged=mode)
    return doc, group


def padded_batch(doc: dict) -> dict[str, np.ndarray]:
    """The JSON form's columns as the rectangular batch record_to_train_batch hands to
    pack_payload: jagged columns right-padded with 0 to the longest row."""
    out = {}
    for name, spec in doc["fields"].items():
        f = field_from_json(name, spec)
        if f.layout == "dense":
            out[name] = f.values.reshape(f.shape)
            continue
        rows = [f.values.reshape([-1, *f.shape])[a:b] for a, b in zip(f.offsets[:-1], f.offsets[1:])]
        width = max(len(r) for r in rows)
        batch = np.zeros([len(rows), width, *f.shape], dtype=f.values.dtype)
        for i, r in enumerate(rows):
            batch[i, : len(r)] = r
        out[name] = batch
    return out


def pack_payload_rows(doc: dict) -> dict[str, Any]:
    """pack_payload's layout of the record_to_train_batch columns: per row for the
    token-aligned ones of >= 2 dims with N rows and room for the longest length,
    else the rectangular column."""
    batch = padded_batch(doc)
    lengths = batch["input_lengths"]
    n = len(lengths)
    out: dict[str, Any] = {}
    for name in PAYLOAD_FIELDS:
        if name not in batch:
            continue
        col = batch[name]
        if name in TOKEN_ALIGNED and col.ndim >= 2 and col.shape[0] == n and col.shape[1] >= lengths.max():
            out[name] = [col[i, : lengths[i]] for i in range(n)]
        else:
            out[name] = col
    return out


def same(got: torch.Tensor, want: np.ndarray) -> bool:
    got = got.numpy()
    return got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want, equal_nan=got.dtype.kind == "f")


def assert_received_as_pack_payload(doc: dict, sample_ids: list[str], td: Any, tags: list[dict]) -> None:
    n = len(doc["sample_ids"])
    assert isinstance(td, TensorDict) and list(td.batch_size) == [n]
    assert sample_ids == [f"{doc['group_id']}_g{i}" for i in range(n)]
    for name, want in pack_payload_rows(doc).items():
        got = td.get(name)
        assert isinstance(got, torch.Tensor), name
        assert got.dtype == NEMO_DTYPES[name], (name, got.dtype)
        if isinstance(want, list):
            assert got.is_nested and got.layout == torch.jagged, name
            rows = got.unbind()
            assert len(rows) == n and all(same(r, w) for r, w in zip(rows, want)), name
        else:
            assert not got.is_nested and same(got, want), name
    for i, tag in enumerate(tags):
        assert type(tag["weight_version"]) is int and tag["weight_version"] == doc["tags"][i]["weight_version"]


def assert_extras_as_json(doc: dict, td: Any) -> None:
    """Our columns beyond pack_payload's: tensor leaves with the JSON form's dtype and values."""
    for name, spec in doc["fields"].items():
        if name in PAYLOAD_FIELDS:
            continue
        want = field_from_json(name, spec)
        got = td.get(name)
        assert isinstance(got, torch.Tensor), name
        if want.layout == "jagged":
            assert got.is_nested and got.layout == torch.jagged, name
            assert got.offsets().tolist() == want.offsets.tolist(), name
            assert same(got.values().reshape(-1), want.values), name
        else:
            assert same(got.reshape(-1), want.values) and list(got.shape) == want.shape, name


# ── tests ─────────────────────────────────────────────────────────────────


def test_the_shared_vectors_are_there():
    assert {"small-text-0", "routes-media-violations-0"} <= set(VECTOR_NAMES)


@pytest.mark.parametrize("adapter", ["noop", "transfer_queue"])
@pytest.mark.parametrize("mode", ["torch", "numpy"])
@pytest.mark.parametrize("name", VECTOR_NAMES)
def test_every_shared_vector_reaches_the_client_as_pack_payload_lays_it_out(name, mode, adapter):
    doc, group = vector(name, mode)
    client = registered(adapter)
    meta = DataPlaneSink(client, "rollout_data")(*group)
    [(sample_ids, partition, td, tags)] = client.received
    assert partition == "rollout_data" and meta.sample_ids == sample_ids and meta.tags == tags
    assert_received_as_pack_payload(doc, sample_ids, td, tags)
    assert_extras_as_json(doc, td)
    assert set(td.keys()) == set(doc["fields"])
    for i, tag in enumerate(tags):  # our tags ride along, as the decoder gives them
        assert tag == group.tags[i] and tag is not group.tags[i]


@pytest.mark.parametrize("mode", ["torch", "numpy"])
def test_stored_rows_come_back_with_their_dtypes_and_values(mode):
    doc, group = vector("routes-media-violations-0", mode)
    client = registered("noop")
    DataPlaneSink(client, "rollout_data")(*group)
    back = client.get_samples(group.sample_ids, "rollout_data", ["input_ids", "routed_experts", "total_reward"])
    want = pack_payload_rows(doc)
    assert all(same(r, w) for r, w in zip(back["input_ids"].unbind(), want["input_ids"]))
    assert all(same(r, w) for r, w in zip(back["routed_experts"].unbind(), want["routed_experts"]))
    assert same(back["total_reward"], want["total_reward"])


def test_numpy_fields_are_wrapped_not_copied_and_shared_offsets_stay_shared():
    _, group = vector("small-text-0", "numpy")
    client = registered("transfer_queue")
    DataPlaneSink(client, "rollout_data")(*group)
    td = client.received[0][2]
    ids, mask = td.get("input_ids"), td.get("token_mask")
    assert np.shares_memory(ids.values().numpy(), group.fields["input_ids"].values)
    assert np.shares_memory(td.get("total_reward").numpy(), group.fields["total_reward"])
    assert ids.offsets() is mask.offsets()
    assert ids.shape[1] == mask.shape[1]  # one ragged dimension: ids * mask works
    assert (ids * mask).offsets() is ids.offsets()


def test_only_payload_fields_sends_what_nemo_rl_writes_and_passes_the_mooncake_rule():
    doc, group = vector("routes-media-violations-0", "torch")
    client = registered("transfer_queue", backend="mooncake_cpu")
    with pytest.raises(ValueError, match="'mask_sample' is a dense 1D tensor"):
        DataPlaneSink(client, "rollout_data")(*group)
    DataPlaneSink(client, "rollout_data", only=PAYLOAD_FIELDS)(*group)
    sample_ids, _, td, tags = client.received[-1]
    assert set(td.keys()) == set(PAYLOAD_FIELDS)
    assert_received_as_pack_payload(doc, sample_ids, td, tags)


def _with_object_field(mode: str = "torch"):
    _, group = vector("small-text-0", mode)
    n = len(group)
    items = [{"turns": 2}, None, "x", [1, 2]][:n] + [None] * max(0, n - 4)
    arr = np.empty(n, dtype=object)
    for i, it in enumerate(items):
        arr[i] = it
    group.fields["extra"] = arr
    return group, items


def test_object_fields_are_refused_by_default_and_nothing_is_written():
    group, _ = _with_object_field()
    client = registered("transfer_queue")
    with pytest.raises(DataPlaneFieldError, match="'extra' holds Python objects") as err:
        DataPlaneSink(client, "rollout_data")(*group)
    assert err.value.code == "data_plane_field" and err.value.details["field"] == "extra"
    assert client.received == []


def test_object_fields_go_as_non_tensor_stacks_which_only_the_transfer_queue_adapter_takes():
    group, items = _with_object_field()
    tq = registered("transfer_queue")
    DataPlaneSink(tq, "rollout_data", object_fields="non_tensor")(*group)
    leaf = tq.received[0][2].get("extra")
    assert isinstance(leaf, NonTensorStack) and leaf.tolist() == items
    noop = registered("noop")
    with pytest.raises(TypeError, match="non-tensor leaves: \\['extra'\\]"):
        DataPlaneSink(noop, "rollout_data", object_fields="non_tensor")(*group)


def test_object_fields_can_be_dropped():
    group, _ = _with_object_field("numpy")
    client = registered("noop")
    DataPlaneSink(client, "rollout_data", object_fields="drop")(*group)
    assert "extra" not in client.received[0][2].keys() and "input_ids" in client.received[0][2].keys()


@pytest.mark.parametrize(
    "value, problem",
    [
        (["a", "b", "c", "d"], "is a list, not a tensor"),
        (np.zeros(3, dtype=np.float32), "has 3 rows, not one per sample id \\(4\\)"),
        (np.float32(1.0), "is a float32, not a tensor"),
        (torch.tensor(1.0), "has no row dimension"),
        (JaggedArray(np.zeros(3, np.int64), np.array([0, 1, 2, 3])), "has 3 rows"),
        ("strided", "strided nested tensor"),
    ],
)
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")
def test_fields_that_are_not_one_tensor_row_per_sample_are_refused_by_name(value, problem):
    _, group = vector("small-text-0", "torch")
    if isinstance(value, str):
        value = torch.nested.nested_tensor([torch.zeros(1), torch.zeros(2), torch.zeros(1), torch.zeros(3)])
    group.fields["bad"] = value
    client = registered("transfer_queue")
    with pytest.raises(DataPlaneFieldError, match=f"field 'bad' {problem}" if "strided" not in problem else problem):
        DataPlaneSink(client, "rollout_data")(*group)
    assert client.received == []


def test_tags_reach_the_client_as_plain_values_in_new_dicts():
    _, group = vector("small-text-0", "torch")
    tags = [dict(t, weight_version=np.int64(t["weight_version"]), score=np.float32(0.5), shape=(np.int32(2), 3)) for t in group.tags]
    client = registered("noop")
    DataPlaneSink(client, "rollout_data")(group.sample_ids, group.fields, tags)
    got = client.received[0][3]
    assert [type(t["weight_version"]) for t in got] == [int] * len(tags)
    assert got[0]["score"] == 0.5 and type(got[0]["score"]) is float
    assert got[0]["shape"] == [2, 3] and all(type(x) is int for x in got[0]["shape"])
    assert all(g is not t for g, t in zip(got, tags))


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda tags: tags[:-1], "3 tags for 4 sample ids"),
        (lambda tags: [{k: v for k, v in t.items() if k != "weight_version"} for t in tags], "row 0 has weight_version None"),
        (lambda tags: [dict(t, weight_version="3") for t in tags], "row 0 has weight_version '3'"),
        (lambda tags: [dict(t, weight_version=True) for t in tags], "row 0 has weight_version True"),
        (lambda tags: [dict(t, blob=object()) for t in tags], "tag 'blob' of row 0 is a object"),
        (lambda tags: ["weight_version"] * len(tags), "tag of row 0 is a str"),
    ],
)
def test_tags_nemo_rl_could_not_use_are_refused(change, problem):
    _, group = vector("small-text-0", "torch")
    client = registered("noop")
    with pytest.raises(DataPlaneFieldError, match=problem):
        DataPlaneSink(client, "rollout_data")(group.sample_ids, group.fields, change(group.tags))
    assert client.received == []


def test_feed_writes_each_call_through_the_sink_and_commits_after_it():
    groups = [vector(n, "torch")[1] for n in ("small-text-0", "small-text-1")]
    docs = [vector(n, "torch")[0] for n in ("small-text-0", "small-text-1")]
    consumer = FakeConsumer(groups)
    client = registered("noop")
    stats = feed(consumer, DataPlaneSink(client, "rollout_data"), stop_after=2, poll_timeout=0, current_weight_version=2)
    assert stats.groups == 2 and stats.calls == 2 and consumer.committed == 2
    for doc, (sample_ids, _, td, tags) in zip(docs, client.received):
        assert_received_as_pack_payload(doc, sample_ids, td, tags)
        assert [t["weight_lag"] for t in tags] == [2 - t["weight_version"] for t in doc["tags"]]
    rows = client.partitions["rollout_data"]["rows"]
    assert set(rows) == {s for d in docs for s in d["sample_ids"]}


def test_feed_merges_groups_into_one_put_samples_when_they_line_up():
    _, group = vector("small-text-0", "numpy")
    _, again = vector("small-text-0", "numpy")
    again.sample_ids = [s.replace("-g0000", "-g9999") for s in again.sample_ids]
    consumer = FakeConsumer([group, again])
    client = registered("transfer_queue")
    stats = feed(consumer, DataPlaneSink(client, "rollout_data"), max_groups_per_call=2, stop_after=2, poll_timeout=0)
    assert stats.calls == 1 and consumer.committed == 2
    sample_ids, _, td, tags = client.received[0]
    n = len(group)
    assert list(td.batch_size) == [2 * n] and len(tags) == 2 * n and sample_ids == group.sample_ids + again.sample_ids
    ids = td.get("input_ids").unbind()
    assert all(np.array_equal(ids[i].numpy(), ids[i + n].numpy()) for i in range(n))


def test_a_put_samples_the_client_refuses_leaves_the_group_uncommitted():
    _, group = vector("small-text-0", "torch")
    consumer = FakeConsumer([group])
    client = InMemoryDataPlane("noop")  # no register_partition: NeMo-RL's in-memory client raises KeyError
    with pytest.raises(KeyError, match="rollout_data"):
        feed(consumer, DataPlaneSink(client, "rollout_data"), stop_after=1, poll_timeout=0)
    assert consumer.committed == 0 and consumer.events[-1] == "rewind 0"


def test_input_lengths_tags_give_a_claiming_trainer_its_sequence_lengths_when_asked_for():
    doc, group = vector("routes-media-violations-0", "numpy")
    want = [int(x) for x in padded_batch(doc)["input_lengths"]]
    plain, stamped = registered("transfer_queue"), registered("transfer_queue")
    DataPlaneSink(plain, "rollout_data")(*group)
    DataPlaneSink(stamped, "rollout_data", tag_input_lengths=True)(*group)
    assert plain.claim_meta("rollout_data", "train", ["input_ids"], 8).sequence_lengths is None
    meta = stamped.claim_meta("rollout_data", "train", ["input_ids"], 8)
    assert meta.sample_ids == group.sample_ids and meta.sequence_lengths == want
    assert [t["input_lengths"] for t in stamped.received[0][3]] == want
    del group.fields["input_lengths"]
    with pytest.raises(DataPlaneFieldError, match="needs a dense input_lengths field of 3 rows"):
        DataPlaneSink(stamped, "rollout_data", tag_input_lengths=True)(*group)


def test_a_ray_actor_handle_is_called_remotely_and_waited_for(monkeypatch):
    _, group = vector("small-text-0", "torch")
    client = registered("noop")
    waited = []

    class Method:
        def __call__(self, **kw):
            raise TypeError("Actor methods cannot be called directly")

        def remote(self, **kw):
            return ("ref", client.put_samples(**kw))

    fake_ray = types.SimpleNamespace(get=lambda ref: waited.append(ref[0]) or ref[1])
    monkeypatch.setitem(sys.modules, "ray", fake_ray)
    meta = DataPlaneSink(types.SimpleNamespace(put_samples=Method()), "rollout_data")(*group)
    assert waited == ["ref"] and meta.sample_ids == group.sample_ids


def test_without_tensordict_the_sink_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensordict", None)
    with pytest.raises(ImportError, match=r"needs torch and tensordict .*rollout-stream\[torch,tq\]"):
        DataPlaneSink(registered(), "rollout_data")


@pytest.mark.parametrize(
    "kwargs, error, problem",
    [
        ({"partition_id": ""}, ValueError, "partition_id must be a non-empty string"),
        ({"object_fields": "pickle"}, ValueError, "object_fields must be one of"),
        ({"client": object()}, TypeError, "has no put_samples"),
    ],
)
def test_a_sink_that_could_not_work_is_refused_when_built(kwargs, error, problem):
    args = {"client": registered(), "partition_id": "rollout_data", **kwargs}
    with pytest.raises(error, match=problem):
        DataPlaneSink(args.pop("client"), args.pop("partition_id"), **args)
