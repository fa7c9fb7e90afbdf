"""From a trained (or any Hugging Face) cross-encoder folder to what Triton serves.

`hybridsearch train-reranker` writes a transformers folder; this module exports it to ONNX fp32
and int8, scores both on the training run's validation set (so the card says what quantisation
cost), and ships the int8 model inside the package (services/reranker/model/), where
`hybridsearch export-models` picks it up, checks its sha256 and installs it for Triton.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hybridsearch.runtime.models import ModelUnavailable, sha256_file, verify

SHIPPED = Path(__file__).parent / "model"
SHIPPED_FILES = ("model.onnx", "tokenizer.json", "manifest.json")


def onnx_scorer(folder: Path, max_length: int, threads: int = 0):
    """score(query, passages, batch) -> logits, with ONNX Runtime the way Triton's model.py runs it."""
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")  # long queries (ArguAna) must not fail
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    session = ort.InferenceSession(str(folder / "model.onnx"), opts, providers=["CPUExecutionProvider"])

    def score(query: str, passages: list[str], batch: int) -> list[float]:
        out: list[float] = []
        for start in range(0, len(passages), batch):
            enc = tokenizer.encode_batch([(query, p) for p in passages[start:start + batch]])
            feed = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
            out += session.run(None, feed)[0].reshape(len(enc), -1)[:, 0].tolist()
        return out

    return score


def export_trained(train_dir: Path, card: dict, validation: list[dict] | None = None) -> dict[str, dict]:
    """train_dir/onnx-fp32 and train_dir/onnx-int8, each with a manifest carrying the card and,
    with a validation set, its MRR@10 as ONNX Runtime computes it."""
    from hybridsearch.runtime.onnx_export import export_cross_encoder, quantize_int8
    from hybridsearch.tools.train_reranker import mrr_at_10

    summary = {k: card[k] for k in ("name", "base", "data", "steps", "pairs_seen", "device", "train_minutes",
                                    "validation_mrr10_best") if k in card}
    max_length = int(card.get("config", {}).get("max_length", 256))
    manifests = {}
    fp32_dir, int8_dir = train_dir / "onnx-fp32", train_dir / "onnx-int8"
    manifests["fp32"] = export_cross_encoder(train_dir, fp32_dir, card={**summary, "max_length": max_length})
    manifests["int8"] = quantize_int8(fp32_dir, int8_dir, card={"max_length": max_length})
    for precision, folder in (("fp32", fp32_dir), ("int8", int8_dir)):
        if validation:
            mrr = mrr_at_10(onnx_scorer(folder, max_length), validation)
            manifests[precision]["onnx_validation_mrr10"] = mrr
        manifests[precision]["size_mb"] = round((folder / "model.onnx").stat().st_size / 1e6, 1)
        (folder / "manifest.json").write_text(json.dumps(manifests[precision], indent=2))
    return manifests


def ship(int8_dir: Path, card: dict, manifests: dict[str, dict]) -> Path:
    """Copy the int8 export into the package, with a human-readable model card next to it."""
    SHIPPED.mkdir(parents=True, exist_ok=True)
    for name in SHIPPED_FILES:
        shutil.copy(int8_dir / name, SHIPPED / name)
    (SHIPPED / "training_card.json").write_text(json.dumps(card, indent=2) + "\n")
    (SHIPPED / "MODEL_CARD.md").write_text(model_card(card, manifests))
    return SHIPPED


def model_card(card: dict, manifests: dict[str, dict]) -> str:
    cfg = card.get("config", {})
    best = card.get("validation_mrr10_best", {})
    lines = [
        f"# {card.get('name', 'reranker')}",
        "",
        "Cross-encoder reranker trained by `hybridsearch train-reranker` (services/tools/train_reranker.py).",
        "",
        f"- base: {card.get('base')}",
        f"- layers kept: {cfg.get('layers') or 'all'}; max sequence length: {cfg.get('max_length')}",
        f"- data: {card.get('data')}",
        f"- loss: softmax cross-entropy over (positive, BM25 hard negative, {cfg.get('in_batch')} in-batch negatives)",
        f"- steps: {card.get('steps')} × {cfg.get('batch_size')} queries ({card.get('pairs_seen')} pairs), lr {cfg.get('lr')}, "
        f"seed {cfg.get('seed')}, device {card.get('device')}",
        f"- training minutes: {card.get('train_minutes')} (whole run incl. validation: {card.get('total_minutes')})",
        f"- validation: {card.get('validation')} ({cfg.get('val_queries')} queries, pool {cfg.get('val_pool')})",
        f"- validation MRR@10 before training: {_fmt(card.get('validation_mrr10_before', {}))}",
        f"- validation MRR@10 best (step {best.get('step')}): {_fmt(best.get('by_source', {}))}",
    ]
    for precision, manifest in manifests.items():
        lines.append(f"- ONNX {precision}: {manifest.get('size_mb')} MB, validation MRR@10 "
                     f"{_fmt(manifest.get('onnx_validation_mrr10', {}))}, sha256 {manifest['sha256']}")
    lines += ["", "Shipped here: the int8 model. Caveat: the data is 98% SQuAD (high word overlap between question",
              "and passage); measure on the evaluation collections (docs/quality.md) before trusting it.", ""]
    return "\n".join(lines)


def _fmt(scores: dict) -> str:
    return ", ".join(f"{k} {v:.4f}" for k, v in scores.items()) or "n/a"


def install_shipped(target: Path) -> bool:
    """Copies the packaged reranker to target (data_dir/models/reranker) after checking its sha256.
    False when the package ships none."""
    manifest_path = SHIPPED / "manifest.json"
    if not manifest_path.exists():
        return False
    manifest = json.loads(manifest_path.read_text())
    verify(SHIPPED / "model.onnx", manifest["sha256"])
    current = target / "manifest.json"
    if current.exists() and json.loads(current.read_text()).get("sha256") == manifest["sha256"]:
        return True
    target.mkdir(parents=True, exist_ok=True)
    for name in SHIPPED_FILES:
        shutil.copy(SHIPPED / name, target / name)
    return True


def check_pins(folder: Path, pins_file: Path | None) -> None:
    """A user's Hugging Face folder is data: every weight/config/tokenizer file must match a sha256
    pinned in a `sha256sum`-format file before anything loads it."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".safetensors", ".bin", ".json", ".txt"))
    if pins_file is None:
        listing = "\n".join(f"{sha256_file(p)}  {p.name}" for p in files)
        raise ModelUnavailable(f"pin the files of {folder} first (review them, save this as a file, pass --pins FILE):\n{listing}")
    pins = {}
    for line in pins_file.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            pins[name.strip().lstrip("*")] = digest
    for p in files:
        if p.name not in pins:
            raise ModelUnavailable(f"{p} is not pinned in {pins_file}")
        actual = sha256_file(p)  # hashed every time: the folder is the user's and may change
        if actual != pins[p.name]:
            raise ModelUnavailable(f"{p}: sha256 {actual} does not match the pinned {pins[p.name]}")
