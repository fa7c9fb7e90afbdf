"""Exports of transformer weights to ONNX (needs the [export] extra: torch, transformers).

Used for the fp32 embedder and for a cross-encoder folder (the untrained placeholder of #2, or
any Hugging Face cross-encoder folder a user points at). Output: model.onnx + manifest.json with
the file's sha256, which loaders check before use.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from hybridsearch.runtime.models import sha256_file


def _takes_token_types(model) -> bool:
    """BERT-style encoders take token_type_ids; MPNet and RoBERTa-style ones do not."""
    import inspect

    return "token_type_ids" in inspect.signature(model.forward).parameters


def _wrapped(model, output: str, inputs: tuple[str, ...]):
    """Positional inputs -> one named output, for export."""
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args):
            return getattr(self.model(**dict(zip(inputs, args))), output)

    return Wrapper().eval()


def _write_manifest(folder: Path, **extra) -> dict:
    manifest = {"sha256": sha256_file(folder / "model.onnx"), "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **extra}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def _export(model, output: str, path: Path, output_axes: dict[int, str]) -> None:
    import torch

    dummy = torch.ones(2, 16, dtype=torch.long)
    inputs = ("input_ids", "attention_mask", "token_type_ids")[: 3 if _takes_token_types(model) else 2]
    with torch.no_grad():
        torch.onnx.export(
            _wrapped(model, output, inputs), (dummy, dummy, torch.zeros_like(dummy))[: len(inputs)], str(path),
            input_names=list(inputs), output_names=[output],
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in inputs} | {output: output_axes},
            opset_version=17, dynamo=False,
        )


def export_encoder(source: Path, out: Path) -> dict:
    """Bare encoder (last_hidden_state), for mean-pooled sentence embeddings."""
    from transformers import AutoModel

    out.mkdir(parents=True, exist_ok=True)
    model = AutoModel.from_pretrained(str(source)).eval()
    _export(model, "last_hidden_state", out / "model.onnx", {0: "batch", 1: "sequence"})
    (out / "tokenizer.json").write_bytes((source / "tokenizer.json").read_bytes())  # travels with an int8 form
    return _write_manifest(out, source=str(source), kind="encoder")


def export_cross_encoder(source: Path, out: Path, *, fresh_head_seed: int | None = None, card: dict | None = None) -> dict:
    """Sequence classifier with one logit. With fresh_head_seed the head is newly initialised
    (an untrained placeholder), and the manifest says so."""
    import torch
    from transformers import AutoModelForSequenceClassification

    out.mkdir(parents=True, exist_ok=True)
    if fresh_head_seed is not None:
        torch.manual_seed(fresh_head_seed)
    model = AutoModelForSequenceClassification.from_pretrained(str(source), num_labels=1).eval()
    _export(model, "logits", out / "model.onnx", {0: "batch"})
    (out / "tokenizer.json").write_bytes((source / "tokenizer.json").read_bytes())
    info = dict(card or {})
    info.setdefault("trained", fresh_head_seed is None)
    return _write_manifest(out, source=str(source), kind="cross-encoder", **info)


def quantize_int8(fp32_dir: Path, out: Path, card: dict | None = None) -> dict:
    """Dynamic int8 quantisation (weights int8, activations quantised at run time): ~4x smaller,
    the form `make run` ships. Tokenizer and card travel with it."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out.mkdir(parents=True, exist_ok=True)
    quantize_dynamic(str(fp32_dir / "model.onnx"), str(out / "model.onnx"), weight_type=QuantType.QInt8,
                     per_channel=True)
    (out / "tokenizer.json").write_bytes((fp32_dir / "tokenizer.json").read_bytes())
    source = json.loads((fp32_dir / "manifest.json").read_text())
    info = {k: v for k, v in source.items() if k not in ("sha256", "exported_at")}
    info.update(card or {}, precision="int8 (onnxruntime dynamic, per-channel)")
    return _write_manifest(out, **info)
