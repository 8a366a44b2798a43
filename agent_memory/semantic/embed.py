"""Sentence embeddings for semantic recall (the ``semantic`` extra): all-MiniLM-L6-v2 in numpy.

Only imported when the extra is installed (``status.extra_installed``), so a vault without
it never loads numpy. The model is the BERT encoder of sentence-transformers'
all-MiniLM-L6-v2 (6 layers, 384 dimensions), run by our own forward pass over its
``model.safetensors`` weights: embeddings, 6 x (self-attention, feed-forward), mean
pooling over the real tokens, unit length. No torch or ONNX Runtime is needed: numpy
(BLAS matrix products) and ``tokenizers`` (the model's own ``tokenizer.json``) are the
whole runtime.

Where the weights come from: ``model_files.model_dir``.
"""

from __future__ import annotations

import json
import math
import os
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# One BLAS thread: a query's products are small, and OpenBLAS's worker threads spinning
# for cores other processes hold made one 12-token encode take 0.7 s instead of 11 ms
# on a busy 2-core machine. Only effective before numpy is first imported; a value the
# user set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from .model_files import model_dir

DIMENSIONS = 384
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model: longer text is cut
BATCH_TOKENS = 256  # tokens (padded) per forward pass: bounds its memory (+18 MB; 2,048 took +166 MB, no faster)
OVERLAP = 32  # tokens shared by consecutive chunks of a long text
MAX_CHUNKS = 256  # chunks of one text at most (about 60,000 tokens): a 100 MB file is not embedded whole
THREADS = max(1, min(4, os.cpu_count() or 1))  # forward passes run at once in one long encode
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path, f16: frozenset[str] = frozenset(),
                     bf16: frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file (a little-endian u64 header length, a JSON header
    of dtype/shape/offsets, raw little-endian data), read into memory; those named in
    ``f16`` kept as float16, those in ``bf16`` as bfloat16 (``uint16``: the upper half
    of each float32, rounded to nearest even; ``widen`` gives float32 back). Converted a
    block at a time as they are read: no full copy in the file's dtype is ever held.
    Read, not memory-mapped: mapped pages would count in the process's memory beside the
    arrays built from them."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, end = info["data_offsets"]
            dtype = np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")
            count = (end - start) // dtype.itemsize
            f.seek(8 + size + start)
            if name not in f16 and name not in bf16:
                out[name] = np.fromfile(f, dtype=dtype, count=count).reshape(info["shape"])
                continue
            kept = np.empty(count, dtype=np.float16 if name in f16 else np.uint16)
            for at in range(0, count, 1 << 17):  # small blocks: the scratch a process keeps is small too
                block = np.fromfile(f, dtype=dtype, count=min(1 << 17, count - at)).astype(np.float32)
                if name in f16:
                    kept[at:at + len(block)] = block
                else:
                    bits = block.view(np.uint32)
                    kept[at:at + len(block)] = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
            out[name] = kept.reshape(info["shape"])
    return out


def widen(half: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """bfloat16 (``uint16``) -> float32, written into ``scratch`` (``uint32``, at least as
    large): a shift per number, a tenth of a millisecond for a layer's largest matrix."""
    wide = scratch[: half.size].reshape(half.shape)
    np.left_shift(half, 16, out=wide, dtype=np.uint32)
    return wide.view(np.float32)


def _gelu(h: np.ndarray) -> np.ndarray:
    """GELU by its tanh form, in place: one ``np.tanh`` (vectorised in numpy) where the
    exact erf form needs a dozen passes over the largest activations (0.5 ms against 7
    for a 256-token chunk's layer). The two differ by under 1e-3 per activation;
    the vectors by a cosine above 0.999 (tests compare them with the exact form)."""
    inner = h * h
    inner *= 0.044715 * 0.7978845608
    inner += 0.7978845608
    inner *= h
    np.tanh(inner, out=inner)
    inner += 1.0
    inner *= 0.5
    h *= inner
    return h


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(var + eps) * weight + bias)


def _token_id(tokenizer: Any, token: str) -> int:
    found = tokenizer.token_to_id(token)
    if found is None:
        raise ValueError(f"the model's tokenizer has no {token} token")
    return int(found)


class Encoder:
    """Text -> unit vectors of ``DIMENSIONS`` floats (cosine = dot product).

    Thread-safe: the weights are read-only and each call has its own activations."""

    def __init__(self, folder: Path | None = None) -> None:
        from tokenizers import Tokenizer

        folder = folder or model_dir()
        config = json.loads((folder / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()  # long texts are cut into chunks (``chunks``), not cut short
        self.cls, self.sep = (_token_id(self.tokenizer, t) for t in ("[CLS]", "[SEP]"))
        words = "embeddings.word_embeddings.weight"
        dense = [f"encoder.layer.{i}.{n}.weight" for i in range(self.layers) for n in (
            "attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
            "intermediate.dense", "output.dense")]
        # Memory (what a server holds at 100k memories is measured in benchmarks/): the
        # word embeddings are looked up, not multiplied, so half precision serves (47 MB
        # -> 23 MB); the layers' matrices are kept as bfloat16 and widened to float32 one
        # matrix at a time for its product (42 MB -> 21 MB, +1 ms a question). Vectors
        # move by a cosine under 3e-5 (the recall benchmarks measured no loss; signed
        # bytes for the words as well moved them 2x as much and lost a LoCoMo hit).
        w = read_safetensors(folder / "model.safetensors", frozenset({words}), frozenset(dense))
        self.words = w[words]
        self.positions = w["embeddings.position_embeddings.weight"][:MAX_TOKENS].copy()  # 512 stored, 256 used
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        # Matrices stay as stored, (out, in): ``x @ w.T`` is one BLAS call on the
        # transposed view. Query, key and value are one (1152, 384) product.
        self.blocks: list[dict[str, Any]] = []
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            self.blocks.append({
                "qkv": np.concatenate([w.pop(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")]),
                "qkv_b": np.concatenate([w.pop(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")]),
                "out": w[p + "attention.output.dense.weight"],
                "out_b": w[p + "attention.output.dense.bias"],
                "ln1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                "up": w[p + "intermediate.dense.weight"],
                "up_b": w[p + "intermediate.dense.bias"],
                "down": w[p + "output.dense.weight"],
                "down_b": w[p + "output.dense.bias"],
                "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            })
        self.scratch_size = max(b[k].size for b in self.blocks for k in ("qkv", "out", "up", "down"))
        self._scratch: list[np.ndarray] = []  # free buffers (list.pop and append are atomic)
        self.ln0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])

    def encode(self, texts: list[str]) -> np.ndarray:
        """One unit vector (float32) per text, in order, each of the text's first
        ``MAX_TOKENS`` tokens (a question, a short memory)."""
        return self.encode_ids([self.chunks(text)[0] for text in texts])

    def chunks(self, text: str, head: str = "") -> list[list[int]]:
        """The token ids (with the model's own [CLS] and [SEP]) of every chunk of
        ``text``, so every word of a long text is embedded: a text within ``MAX_TOKENS``
        is one chunk, encoded exactly as the model reads it; a longer one is cut into
        windows overlapping by ``OVERLAP`` tokens, each after the first led by ``head``
        (a memory's title: what a window of its body is about). At most ``MAX_CHUNKS``."""
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        room = MAX_TOKENS - 2
        if len(ids) <= room:
            return [[self.cls, *ids, self.sep]]
        lead = self.tokenizer.encode(f"{head}\n", add_special_tokens=False).ids if head else []
        lead = lead[: room // 4]  # a title longer than a quarter of a window is cut
        out = [[self.cls, *ids[:room], self.sep]]
        start, width = room - OVERLAP, room - len(lead)
        while len(out) < MAX_CHUNKS and start < len(ids) - OVERLAP:
            out.append([self.cls, *lead, *ids[start:start + width], self.sep])
            start += width - OVERLAP
        return out

    def encode_ids(self, pieces: list[list[int]]) -> np.ndarray:
        """One unit vector per list of token ids (each with [CLS] and [SEP], at most
        ``MAX_TOKENS``), in order. Sorted by length and batched, so little padding is
        computed; the batches of a long encode run on ``THREADS`` threads (numpy lets go
        of the GIL in its products and element-wise loops, so they use as many cores)."""
        if not pieces:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
        batches: list[list[int]] = []
        start = 0
        while start < len(order):
            end = start + 1  # the longest piece so far is the last: padding is to its length
            while end < len(order) and (end + 1 - start) * len(pieces[order[end]]) <= BATCH_TOKENS:
                end += 1
            batches.append(order[start:end])
            start = end
        out = np.zeros((len(pieces), DIMENSIONS), dtype=np.float32)

        def run(chosen: list[int]) -> None:
            out[chosen] = self._forward([pieces[i] for i in chosen])

        if THREADS == 1 or len(batches) == 1:
            for chosen in batches:
                run(chosen)
        else:
            with ThreadPoolExecutor(min(THREADS, len(batches)), thread_name_prefix="agent-memory-encode") as pool:
                list(pool.map(run, batches[::-1]))  # longest first: the last to finish is a short one
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        """The unit vectors of a batch of token ids. Everything stays float32: a numpy
        float64 scalar (``np.sqrt(2.0)``) anywhere turns the activations into float64,
        and every product then copies a layer's weights to float64 first (a 12-token
        question took 25 ms instead of 5)."""
        n, length = len(batch), max(len(b) for b in batch)
        tokens = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, b in enumerate(batch):
            tokens[i, : len(b)] = b
            mask[i, : len(b)] = 1.0
        x = self.words[tokens].astype(np.float32) + self.positions[:length] + self.token_type
        x = _layer_norm(x, *self.ln0, self.eps)
        scratch = self._take_scratch()
        try:
            return self._layers(x, mask, scratch)
        finally:
            self._scratch.append(scratch)

    def _take_scratch(self) -> np.ndarray:
        """A buffer for the widened matrices: one of those free, or a new one when none is
        (one per encode running at once), given back after. A new one for every call
        stayed in the C heap of each server worker thread that ever encoded (2.4 MB each)."""
        try:
            return self._scratch.pop()
        except IndexError:
            return np.empty(self.scratch_size, dtype=np.uint32)

    def _layers(self, x: np.ndarray, mask: np.ndarray, scratch: np.ndarray) -> np.ndarray:
        n, length = mask.shape
        heads, size = self.heads, x.shape[-1] // self.heads
        padded = bool((mask == 0).any())
        blocked = (1.0 - mask)[:, None, None, :] * -1e9  # padding gets no attention
        for block in self.blocks:
            qkv = x @ widen(block["qkv"], scratch).T + block["qkv_b"]
            # Contiguous (3, n, heads, length, size): numpy's stacked products over
            # transposed views skip BLAS and took 4x as long.
            q, k, v = np.ascontiguousarray(qkv.reshape(n, length, 3, heads, size).transpose(2, 0, 3, 1, 4))
            q *= 1.0 / math.sqrt(size)
            scores = q @ k.transpose(0, 1, 3, 2)  # softmax in place: it is heads x length^2 floats
            if padded:
                scores += blocked
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, heads * size)
            ln1_weight, ln1_bias = block["ln1"]
            x = _layer_norm(x + context @ widen(block["out"], scratch).T + block["out_b"], ln1_weight, ln1_bias, self.eps)
            h = x @ widen(block["up"], scratch).T + block["up_b"]
            h = _gelu(h)
            ln2_weight, ln2_bias = block["ln2"]
            x = _layer_norm(x + h @ widen(block["down"], scratch).T + block["down_b"], ln2_weight, ln2_bias, self.eps)
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        return np.asarray(pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12))


_shared: Encoder | None = None
_shared_lock = threading.Lock()


def shared_encoder() -> Encoder:
    """One encoder per process (its weights take 65 MB), loaded on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Encoder()
        return _shared
