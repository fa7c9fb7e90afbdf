"""The production (GPU) Triton model repository for the reranker, from the same export as the CPU one.

The CPU repository (triton.py) serves one python-backend model that tokenises and runs ONNX Runtime on
CPU. On a GPU, Triton's onnxruntime backend runs the model, so tokenisation moves into its own step.
The client (client.py) must not notice: the model it calls keeps its name and its tensors (query,
passage strings in, score out), as an ensemble of three models:

    <name>            ensemble: query, passage -> score
    <name>_tokenize   python backend, KIND_CPU: strings -> token ids padded to the manifest's max_length
    <name>_onnx       onnxruntime backend, KIND_GPU: token ids -> logits (the exported model.onnx, as is)
    <name>_score      python backend, KIND_CPU: logits -> sigmoid, the CPU model's score

fp16 comes from ORT's TensorRT execution accelerator (precision_mode FP16), not from an fp16-converted
file: the GPU repository serves byte for byte the model.onnx the CPU one serves (same sha256, checked
against the manifest here and in the tests), so there is one model to train, validate and pin.
TensorRT builds its fp16 engine at load time (model_warmup), with an optimisation profile fixed to
[1..max_batch_size] x max_length and an engine cache so restarts reuse it. Caveat: the shipped model is
int8 with dynamic quantisation (MatMulInteger, DynamicQuantizeLinear), which TensorRT does not take;
those nodes fall back to ORT's CUDA provider. For a fully fp16 TensorRT graph, pass the fp32 export of
the same training run as source (train_dir/onnx-fp32, with its own manifest).

The ensemble carries `parameters { gpu: "true" }` next to trained/model_name: Triton forbids an
instance_group on an ensemble, so that is where the client can see it is served from a GPU.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from hybridsearch.config.settings import Settings
from hybridsearch.runtime.models import ModelUnavailable
from hybridsearch.reranker.triton import read_export, reranker_export_dir

STEPS_SOURCE = Path(__file__).parent / "gpu_steps.py"
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# Operators of ONNX Runtime's dynamic int8 quantisation that TensorRT cannot run.
DYNAMIC_INT8_OPS = (b"MatMulInteger", b"DynamicQuantizeLinear")


@dataclass(frozen=True)
class GpuOptions:
    gpus: tuple[int, ...] = (0,)
    instances_per_gpu: int = 1  # Triton starts `count` instances on each listed GPU
    max_batch_size: int = 256  # pairs per model execution: the deep rerank pool
    preferred_batch_sizes: tuple[int, ...] = (64, 256)  # the standard and deep GPU pools
    # How long the batcher may hold a request to fill a batch: bounded, well under a query's budget.
    max_queue_delay_us: int = 1000
    max_queue_size: int = 64  # requests waiting per model; beyond that Triton rejects at once
    tokenizer_instances: int = 2
    precision: str = "FP16"  # TensorRT precision_mode: FP16 | FP32
    trt_cache_dir: str = "/tmp/triton-trt-cache"  # mount a volume here to keep engines across restarts
    trt_workspace_bytes: int = 2 << 30

    def __post_init__(self) -> None:
        if not self.gpus or any(g < 0 for g in self.gpus):
            raise ValueError("gpus: at least one device index, none negative")
        if self.instances_per_gpu < 1 or self.tokenizer_instances < 1:
            raise ValueError("instance counts must be >= 1")
        if not 1 <= self.max_batch_size <= 4096:
            raise ValueError("max_batch_size must be in 1..4096")
        if any(not 1 <= b <= self.max_batch_size for b in self.preferred_batch_sizes):
            raise ValueError(f"preferred batch sizes must be in 1..max_batch_size ({self.max_batch_size})")
        if not 0 <= self.max_queue_delay_us <= 100_000:
            raise ValueError("max_queue_delay_us must be in 0..100000 (a bounded delay)")
        if self.max_queue_size < 1:
            raise ValueError("max_queue_size must be >= 1 (a bounded queue)")
        if self.precision not in ("FP16", "FP32"):
            raise ValueError("precision must be FP16 or FP32")


def _io(cls, name: str, dtype: str, dims: list[int]):
    return cls(name=name, data_type=mc.DataType.Value(dtype), dims=dims)


def _params(values: dict[str, str]) -> dict[str, mc.ModelParameter]:
    return {k: mc.ModelParameter(string_value=v) for k, v in values.items()}


def _batching(opts: GpuOptions, timeout_us: int, wait: bool = True) -> mc.ModelDynamicBatching:
    """wait=False: batch what is queued without waiting for more (the cheap python steps)."""
    return mc.ModelDynamicBatching(
        preferred_batch_size=list(opts.preferred_batch_sizes) if wait else [],
        max_queue_delay_microseconds=opts.max_queue_delay_us if wait else 0,
        # Bounded queue: full means an immediate rejection (the gateway degrades to fused order)
        # instead of latency growing without limit; requests older than the client's deadline are dropped.
        default_queue_policy=mc.ModelQueuePolicy(
            max_queue_size=opts.max_queue_size, timeout_action=mc.ModelQueuePolicy.REJECT,
            default_timeout_microseconds=timeout_us, allow_timeout_override=True,
        ),
    )


def model_configs(name: str, manifest: dict, opts: GpuOptions, timeout_us: int) -> dict[str, mc.ModelConfig]:
    """Model name -> ModelConfig of the four models."""
    max_length = int(manifest["max_length"])
    batch = opts.max_batch_size
    tokens = [_io(mc.ModelOutput, n, "TYPE_INT64", [max_length]) for n in ONNX_INPUTS]
    strings_in = [_io(mc.ModelInput, n, "TYPE_STRING", [1]) for n in ("query", "passage")]
    score_out = [_io(mc.ModelOutput, "score", "TYPE_FP32", [1])]

    cpu_group = mc.ModelInstanceGroup(kind=mc.ModelInstanceGroup.KIND_CPU, count=opts.tokenizer_instances)
    tokenize = mc.ModelConfig(
        name=f"{name}_tokenize", backend="python", max_batch_size=batch, input=strings_in, output=tokens,
        instance_group=[cpu_group],
        dynamic_batching=_batching(opts, timeout_us, wait=False),
        parameters=_params({"step": "tokenize", "max_length": str(max_length)}),
    )

    shapes = ",".join(f"{n}:{{b}}x{max_length}" for n in ONNX_INPUTS)
    trt = mc.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator(name="tensorrt", parameters={
        "precision_mode": opts.precision,
        "max_workspace_size_bytes": str(opts.trt_workspace_bytes),
        # LayerNorm in fp16 overflows on BERT-style models; TensorRT keeps it in fp32.
        "trt_layer_norm_fp32_fallback": "1",
        "trt_engine_cache_enable": "1",
        "trt_engine_cache_path": opts.trt_cache_dir,
        "trt_timing_cache_enable": "1",
        "trt_timing_cache_path": opts.trt_cache_dir,
        # One profile for every batch size up to max_batch_size: no engine rebuild on a new shape.
        "trt_profile_min_shapes": shapes.format(b=1),
        "trt_profile_opt_shapes": shapes.format(b=(opts.preferred_batch_sizes or (batch,))[0]),
        "trt_profile_max_shapes": shapes.format(b=batch),
    })
    zeros = {n: mc.ModelWarmup.Input(data_type=mc.TYPE_INT64, dims=[max_length], zero_data=True)
             for n in ONNX_INPUTS}
    onnx = mc.ModelConfig(
        name=f"{name}_onnx", backend="onnxruntime", default_model_filename="model.onnx", max_batch_size=batch,
        input=[_io(mc.ModelInput, n, "TYPE_INT64", [max_length]) for n in ONNX_INPUTS],
        output=[_io(mc.ModelOutput, "logits", "TYPE_FP32", [1])],
        instance_group=[mc.ModelInstanceGroup(kind=mc.ModelInstanceGroup.KIND_GPU, count=opts.instances_per_gpu,
                                              gpus=list(opts.gpus))],
        dynamic_batching=_batching(opts, timeout_us),
        optimization=mc.ModelOptimizationPolicy(
            execution_accelerators=mc.ModelOptimizationPolicy.ExecutionAccelerators(
                gpu_execution_accelerator=[trt]),
        ),
        # Build the TensorRT engine while loading, not on the first query.
        model_warmup=[mc.ModelWarmup(name=f"batch{b}", batch_size=b, inputs=zeros) for b in (1, batch)],
        parameters=_params({"sha256": manifest["sha256"]}),
    )

    score = mc.ModelConfig(
        name=f"{name}_score", backend="python", max_batch_size=batch,
        input=[_io(mc.ModelInput, "logits", "TYPE_FP32", [1])], output=score_out,
        instance_group=[cpu_group],
        dynamic_batching=_batching(opts, timeout_us, wait=False),
        parameters=_params({"step": "score"}),
    )

    step = mc.ModelEnsembling.Step
    ensemble = mc.ModelConfig(
        name=name, platform="ensemble", max_batch_size=batch, input=strings_in, output=score_out,
        ensemble_scheduling=mc.ModelEnsembling(
            step=[
                step(model_name=tokenize.name, model_version=-1,
                     input_map={"query": "query", "passage": "passage"},
                     output_map={n: n for n in ONNX_INPUTS}),
                step(model_name=onnx.name, model_version=-1,
                     input_map={n: n for n in ONNX_INPUTS}, output_map={"logits": "logits"}),
                step(model_name=score.name, model_version=-1, input_map={"logits": "logits"},
                     output_map={"score": "score"}),
            ],
            # Back-pressure: at most this many client requests inside the pipeline at once.
            max_inflight_requests=opts.max_queue_size,
        ),
        parameters=_params({
            "trained": str(bool(manifest.get("trained"))).lower(),
            "model_name": manifest.get("name", "reranker"),
            "gpu": "true",
            "precision": opts.precision.lower(),
        }),
    )
    return {c.name: c for c in (ensemble, tokenize, onnx, score)}


def has_dynamic_int8(model: Path) -> bool:
    data = model.read_bytes()
    return any(op in data for op in DYNAMIC_INT8_OPS)


def build_gpu_repository(settings: Settings, out: Path, opts: GpuOptions | None = None,
                         source: Path | None = None) -> dict:
    """Writes the four-model repository under `out`; returns a summary (models, sha256, notes).

    `source` is an export folder (model.onnx, tokenizer.json, manifest.json); default the one the CPU
    repository is built from (data_dir/models/reranker)."""
    opts = opts or GpuOptions()
    source = source or reranker_export_dir(settings)
    manifest = read_export(source)
    if "max_length" not in manifest:
        raise ModelUnavailable(f"{source}/manifest.json has no max_length: the GPU profile needs a fixed one")
    name = settings.rerank.model_name
    timeout_us = int(settings.rerank.timeout_s * 1e6)
    configs = model_configs(name, manifest, opts, timeout_us)

    out.mkdir(parents=True, exist_ok=True)
    for model_name, config in configs.items():
        target = out / model_name
        shutil.rmtree(target, ignore_errors=True)
        (target / "1").mkdir(parents=True)  # an ensemble needs its (empty) version folder too
        (target / "config.pbtxt").write_text(text_format.MessageToString(config))
    for step in ("tokenize", "score"):
        shutil.copy(STEPS_SOURCE, out / f"{name}_{step}" / "1" / "model.py")
    for file in ("tokenizer.json", "manifest.json"):
        shutil.copy(source / file, out / f"{name}_tokenize" / "1" / file)
    shutil.copy(source / "model.onnx", out / f"{name}_onnx" / "1" / "model.onnx")
    shutil.copy(source / "manifest.json", out / f"{name}_onnx" / "1" / "manifest.json")

    notes = []
    if has_dynamic_int8(source / "model.onnx"):
        notes.append("model.onnx is dynamically quantised int8: TensorRT cannot run MatMulInteger/"
                     "DynamicQuantizeLinear, ORT runs those on CUDA; an fp32 export as --source gives "
                     "TensorRT the whole graph in fp16")
    return {"repository": str(out), "models": sorted(configs), "sha256": manifest["sha256"], "notes": notes}
