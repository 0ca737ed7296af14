"""A toy policy with vLLM's OpenAI-compatible API: the ground truth of the NeMo-Gym tests (a test fixture).

It stands where vLLM stands in front of NeMo-Gym's `vllm_model` server:
`GET /v1/models`, `POST /v1/chat/completions` (logprobs as vLLM returns them
with `return_tokens_as_token_ids`: `{"token": "token_id:<id>", "logprob": x}`),
and `POST /tokenize` at the root (`{"tokens": [...]}`). Prompts are rendered
with a small ChatML-like template and tokenized with the byte-level
`tokenizer.json` beside this file, so the tokens of a later turn's prompt
begin with the previous prompt and the tokens generated for it, as with a
real chat template and tokenizer.

Answers are deterministic from `--seed` and the order of requests with the
same messages: the N rollouts of one prompt differ, and a second run of the
same rollouts (a new process, or more requests) gives other answers, as a
sampling policy does. When the request offers tools, it calls them over
several turns (the arguments follow each tool's JSON schema) with a
reasoning part before each call, then answers in text.

Every prompt it tokenizes and every generation (token ids, logprobs) is
appended to `--record` as one JSON line: what the tests compare the
trainer's tensors against. `--fail-on TEXT` answers HTTP 500 to any request
whose last user message contains TEXT, and with `--fail-seed S` only to those
that also carry `seed` S (NeMo-Gym's per-rollout seed): a rollout that keeps
failing while the other rollouts of its prompt succeed.

    python tools/gym/toy_policy.py --port 0 --seed 7 --record gen.jsonl   # prints "listening <url>"
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TOKENIZER = Path(__file__).with_name("tokenizer.json")
WORDS = "alpha bravo cedar delta ember fjord grove harbor iris juniper kelp lumen meadow nectar orbit".split()


class ByteTokenizer:
    """Encoder/decoder of a byte-level `tokenizer.json` without merges: its special tokens, then one token per byte."""

    def __init__(self, path: Path = TOKENIZER) -> None:
        tok = json.loads(path.read_text())
        vocab: dict[str, int] = tok["model"]["vocab"]
        self.specials = {t["content"]: t["id"] for t in tok["added_tokens"]}
        by_char = {c: i for c, i in vocab.items() if c not in self.specials}
        self.byte_id = [by_char[c] for c in _byte_chars()]
        self.id_text = {i: s.encode() for s, i in self.specials.items()}
        for b, i in enumerate(self.byte_id):
            self.id_text[i] = bytes([b])
        # Longest special first, as Hugging Face splits added tokens.
        self._order = sorted(self.specials, key=len, reverse=True)

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        i = 0
        while i < len(text):
            for s in self._order:
                if text.startswith(s, i):
                    out.append(self.specials[s])
                    i += len(s)
                    break
            else:
                j = min((k for k in (text.find(s, i) for s in self._order) if k >= 0), default=len(text))
                out.extend(self.byte_id[b] for b in text[i:j].encode())
                i = j
        return out

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.id_text[i] for i in ids).decode("utf-8", errors="replace")


def _byte_chars() -> list[str]:
    """GPT-2's byte-to-unicode table (Hugging Face ByteLevel), indexed by byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def render_assistant(msg: dict) -> str:
    """The text of an assistant message: what the policy generated for it, minus the end token."""
    reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
    out = f"<think>{reasoning}</think>" if reasoning else ""
    out += _text(msg.get("content"))
    for call in msg.get("tool_calls") or []:
        fn = call["function"]
        out += f"<tool_call>{fn['name']}\n{fn['arguments']}</tool_call>"
    return out


def render_prompt(messages: list[dict], tools: list | None) -> str:
    """A ChatML-like chat template, ending with the assistant's generation prompt."""
    out = ""
    if tools:
        out += "<|im_start|>system\n# Tools\n" + json.dumps(tools, sort_keys=True, separators=(",", ":")) + "<|im_end|>\n"
    for m in messages:
        role = "system" if m["role"] == "developer" else m["role"]
        if role == "assistant":
            body = render_assistant(m)
        elif role == "tool":
            body = f"<tool_response>{_text(m.get('content'))}</tool_response>"
        else:
            body = _text(m.get("content"))
        out += f"<|im_start|>{role}\n{body}<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


def _schema_args(schema: dict, rng: random.Random, tool_outputs: list[str]) -> dict:
    """Arguments that satisfy a tool's JSON schema: words for strings, numbers seen in tool outputs for int lists."""
    seen_ints = [int(t) for out in tool_outputs for t in _ints(out)]
    args: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        if kind == "string":
            args[name] = rng.choice(WORDS)
        elif kind == "integer":
            args[name] = rng.randrange(100)
        elif kind == "number":
            args[name] = rng.randrange(1000) / 10
        elif kind == "boolean":
            args[name] = rng.random() < 0.5
        elif kind == "array":
            args[name] = seen_ints or [rng.randrange(100)]
        else:
            args[name] = None
    return args


def _ints(text: str) -> list[str]:
    out, cur = [], ""
    for ch in text + " ":
        if ch.isdigit():
            cur += ch
        elif cur:
            out.append(cur)
            cur = ""
    return out


class ToyPolicy:
    def __init__(self, seed: int, record: Path | None, fail_on: str | None, max_tool_turns: int, fail_seed: int | None = None) -> None:
        self.seed = seed
        self.tokenizer = ByteTokenizer()
        self.fail_on = fail_on
        self.fail_seed = fail_seed
        self.max_tool_turns = max_tool_turns
        self._lock = threading.Lock()
        self._calls: Counter[str] = Counter()
        self._record = record.open("a") if record else None
        self.generations = 0

    def record(self, entry: dict) -> None:
        if self._record is not None:
            with self._lock:
                self._record.write(json.dumps(entry) + "\n")
                self._record.flush()

    def tokenize(self, body: dict) -> list[int]:
        ids = self.tokenizer.encode(render_prompt(body.get("messages") or [], body.get("tools")))
        self.record({"kind": "tokenize", "prompt_ids": ids})
        return ids

    def should_fail(self, body: dict) -> bool:
        users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
        if not (self.fail_on and users and self.fail_on in _text(users[-1].get("content"))):
            return False
        return self.fail_seed is None or body.get("seed") == self.fail_seed

    def complete(self, body: dict) -> dict:
        messages = body.get("messages") or []
        tools = body.get("tools") or []
        prompt = render_prompt(messages, tools)
        prompt_ids = self.tokenizer.encode(prompt)
        key = hashlib.sha256(prompt.encode()).hexdigest()
        with self._lock:
            n = self._calls[key]
            self._calls[key] += 1
            self.generations += 1
            serial = self.generations
        rng = random.Random(f"{self.seed}:{key}:{n}")
        turns = sum(1 for m in messages if m.get("role") == "assistant")
        tool_outputs = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
        msg: dict[str, Any] = {"role": "assistant", "content": None}
        nonce = f"{rng.getrandbits(32):08x}"
        wants_tool = tools and turns < self.max_tool_turns
        if wants_tool:
            # The last tool once the others had a turn (e.g. "extract" after "get").
            fn = tools[min(turns, len(tools) - 1)]
            fn = fn.get("function", fn)
            args = json.dumps(_schema_args(fn.get("parameters") or {}, rng, tool_outputs))
            msg["reasoning_content"] = f"call {fn['name']} ({nonce})"
            msg["tool_calls"] = [{"id": f"call_{nonce}{serial}", "type": "function", "function": {"name": fn["name"], "arguments": args}}]
            finish = "tool_calls"
        else:
            if rng.random() < 0.5:
                msg["reasoning_content"] = f"think {nonce}"
            msg["content"] = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 9))) + f" {nonce}"
            finish = "stop"
        gen_ids = self.tokenizer.encode(render_assistant(msg) + "<|im_end|>")
        logprobs = [-rng.random() * 4 for _ in gen_ids]
        self.record({"kind": "generate", "prompt_ids": prompt_ids, "ids": gen_ids, "logprobs": logprobs})
        return {
            "id": f"chatcmpl-{nonce}{serial}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "toy-policy"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": finish,
                    "message": msg,
                    "logprobs": {"content": [{"token": f"token_id:{t}", "logprob": lp, "bytes": None, "top_logprobs": []} for t, lp in zip(gen_ids, logprobs)]},
                }
            ],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(gen_ids), "total_tokens": len(prompt_ids) + len(gen_ids)},
        }


def make_handler(policy: ToyPolicy, model: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: Any) -> None:
            pass

        def _send(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "toy"}]})
            elif self.path in ("/", "/health"):
                self._send(200, {"status": "ok"})
            else:
                self._send(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path == "/tokenize":
                ids = policy.tokenize(body)
                self._send(200, {"count": len(ids), "max_model_len": 1 << 20, "tokens": ids})
            elif self.path == "/v1/chat/completions":
                if policy.should_fail(body):
                    self._send(500, {"object": "error", "message": "toy policy: failing this prompt on purpose", "type": "InternalServerError", "code": 500})
                    return
                self._send(200, policy.complete(body))
            else:
                self._send(404, {"error": f"no route {self.path}"})

    return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="toy-policy")
    ap.add_argument("--record", type=Path, default=None, help="append every tokenized prompt and generation here (JSON lines)")
    ap.add_argument("--fail-on", default=None, help="HTTP 500 when the last user message contains this text")
    ap.add_argument("--fail-seed", type=int, default=None, help="with --fail-on: only requests with this seed")
    ap.add_argument("--max-tool-turns", type=int, default=3, help="tool calls before the text answer, when tools are offered")
    args = ap.parse_args(argv)
    policy = ToyPolicy(args.seed, args.record, args.fail_on, args.max_tool_turns, args.fail_seed)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(policy, args.model))
    server.daemon_threads = True
    print(f"listening http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
