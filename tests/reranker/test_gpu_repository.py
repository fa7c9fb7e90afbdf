"""The GPU Triton repository: every config.pbtxt parsed into Triton's own ModelConfig message, the
ensemble's wiring checked tensor by tensor, the same model file as the CPU repository, and the python
steps run in a real tritonserver (CPU) around the ONNX model run by ONNX Runtime on CPU.

No GPU on this machine, and pytriton's tritonserver has no onnxruntime backend: the <name>_onnx model
(KIND_GPU, TensorRT fp16) is validated as configuration only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import numpy as np
import onnxruntime as ort
import pytest
from google.protobuf import text_format
from tokenizers import Tokenizer
from tritonclient.grpc import model_config_pb2 as mc

from hybridsearch.config.search import RerankSettings
from hybridsearch.config.settings import Settings
from hybridsearch.runtime.models import ModelUnavailable, sha256_file
from hybridsearch.reranker.export import install_shipped, onnx_scorer
from hybridsearch.reranker.gpu_repository import STEPS_SOURCE, GpuOptions, build_gpu_repository
from hybridsearch.reranker.triton import TEMPLATE, build_repository, triton_command

# Ports given to this test (HTTP, gRPC, metrics): nobody else's.
HTTP_PORT, GRPC_PORT, METRICS_PORT = 28300, 28301, 28302
OPTS = GpuOptions(gpus=(0, 1), instances_per_gpu=2, max_batch_size=256, preferred_batch_sizes=(64, 256),
                  max_queue_delay_us=800, max_queue_size=32)
DTYPES = {"tensor(int64)": mc.TYPE_INT64, "tensor(float)": mc.TYPE_FP32}


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    data = tmp_path_factory.mktemp("gpu-repo")
    s = Settings(data_dir=data, models_dir=data / "models",
                 rerank=RerankSettings(triton_url=f"127.0.0.1:{GRPC_PORT}", triton_http_port=HTTP_PORT,
                                       triton_metrics_port=METRICS_PORT))
    if not install_shipped(data / "models" / "reranker"):
        pytest.skip("no reranker ships in this checkout")
    return s


@pytest.fixture(scope="module")
def repo(settings):
    out = settings.data_dir / "gpu"
    summary = build_gpu_repository(settings, out, OPTS)
    return out, summary


def parse(path) -> mc.ModelConfig:
    return text_format.Parse(path.read_text(), mc.ModelConfig())


def configs(out) -> dict[str, mc.ModelConfig]:
    return {p.parent.name: parse(p) for p in out.glob("*/config.pbtxt")}


def test_every_config_parses_as_a_triton_model_config(repo):
    out, summary = repo
    parsed = configs(out)
    assert sorted(parsed) == summary["models"] == ["reranker", "reranker_onnx", "reranker_score", "reranker_tokenize"]
    for folder, config in parsed.items():
        assert config.name == folder  # Triton requires the folder name
        assert (out / folder / "1").is_dir()


def test_the_ensemble_looks_like_the_cpu_model_to_the_client(repo, settings):
    out, _ = repo
    cpu = parse(TEMPLATE / "reranker" / "config.pbtxt")
    ensemble = configs(out)["reranker"]
    assert ensemble.platform == "ensemble"
    assert ensemble.name == settings.rerank.model_name
    assert list(ensemble.input) == list(cpu.input) and list(ensemble.output) == list(cpu.output)
    assert ensemble.max_batch_size == cpu.max_batch_size == 256
    params = {k: v.string_value for k, v in ensemble.parameters.items()}
    manifest = json.loads((settings.models_dir / "reranker" / "manifest.json").read_text())
    assert params == {"trained": str(manifest["trained"]).lower(), "model_name": manifest["name"],
                      "gpu": "true", "precision": "fp16"}
    # What Triton rejects in an ensemble (core's ValidateEnsembleSchedulingConfig).
    assert not ensemble.instance_group and not ensemble.HasField("optimization") and not ensemble.model_warmup
    assert ensemble.ensemble_scheduling.max_inflight_requests == OPTS.max_queue_size


def test_ensemble_steps_connect_matching_tensors(repo):
    out, _ = repo
    parsed = configs(out)
    ensemble = parsed["reranker"]
    produced = {t.name: (t.data_type, list(t.dims)) for t in ensemble.input}
    for step in ensemble.ensemble_scheduling.step:
        model = parsed[step.model_name]
        inputs = {t.name: (t.data_type, list(t.dims)) for t in model.input}
        outputs = {t.name: (t.data_type, list(t.dims)) for t in model.output}
        assert set(step.input_map) == set(inputs) and set(step.output_map) == set(outputs)
        for model_input, tensor in step.input_map.items():
            assert produced[tensor] == inputs[model_input], (step.model_name, model_input)
        for model_output, tensor in step.output_map.items():
            produced[tensor] = outputs[model_output]
        assert model.max_batch_size >= ensemble.max_batch_size
    assert produced["score"] == (mc.TYPE_FP32, [1])


def test_onnx_model_config_gpu_batching_queue_fp16(repo):
    out, summary = repo
    onnx = configs(out)["reranker_onnx"]
    assert onnx.backend == "onnxruntime" and onnx.max_batch_size == 256
    (group,) = onnx.instance_group
    assert (group.kind, group.count, list(group.gpus)) == (mc.ModelInstanceGroup.KIND_GPU, 2, [0, 1])
    batching = onnx.dynamic_batching
    assert list(batching.preferred_batch_size) == [64, 256]
    assert batching.max_queue_delay_microseconds == 800
    policy = batching.default_queue_policy
    assert (policy.max_queue_size, policy.timeout_action) == (32, mc.ModelQueuePolicy.REJECT)
    assert policy.default_timeout_microseconds == 5_000_000  # the reranker client's timeout
    (trt,) = onnx.optimization.execution_accelerators.gpu_execution_accelerator
    assert trt.name == "tensorrt" and trt.parameters["precision_mode"] == "FP16"
    assert trt.parameters["trt_profile_max_shapes"].split(",")[0] == "input_ids:256x128"
    assert [w.batch_size for w in onnx.model_warmup] == [1, 256]
    assert onnx.parameters["sha256"].string_value == summary["sha256"]


def test_onnx_config_matches_the_model_file(repo):
    out, _ = repo
    onnx = configs(out)["reranker_onnx"]
    session = ort.InferenceSession(str(out / "reranker_onnx" / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [(i.name, DTYPES[i.type]) for i in session.get_inputs()] == [(t.name, t.data_type) for t in onnx.input]
    assert [(o.name, DTYPES[o.type]) for o in session.get_outputs()] == [(t.name, t.data_type) for t in onnx.output]
    manifest = json.loads((out / "reranker_tokenize" / "1" / "manifest.json").read_text())
    assert all(list(t.dims) == [manifest["max_length"]] for t in onnx.input)


def test_python_steps_do_not_wait_and_run_on_cpu(repo):
    out, _ = repo
    parsed = configs(out)
    for name, step in (("reranker_tokenize", "tokenize"), ("reranker_score", "score")):
        config = parsed[name]
        assert config.backend == "python" and config.parameters["step"].string_value == step
        assert config.instance_group[0].kind == mc.ModelInstanceGroup.KIND_CPU
        assert config.dynamic_batching.max_queue_delay_microseconds == 0
        assert config.dynamic_batching.default_queue_policy.max_queue_size == 32
        assert (out / name / "1" / "model.py").read_text() == STEPS_SOURCE.read_text()


def test_cpu_and_gpu_repositories_serve_the_same_model_file(repo, settings):
    out, summary = repo
    cpu_repo = build_repository(settings)
    manifest = json.loads((settings.models_dir / "reranker" / "manifest.json").read_text())
    cpu_digest = sha256_file(cpu_repo / "reranker" / "1" / "model.onnx")
    gpu_digest = sha256_file(out / "reranker_onnx" / "1" / "model.onnx")
    assert cpu_digest == gpu_digest == summary["sha256"] == manifest["sha256"]
    assert summary["notes"] and "int8" in summary["notes"][0]  # the shipped model is int8 (dynamic)


def test_a_tampered_source_is_refused(settings, tmp_path):
    source = tmp_path / "export"
    shutil.copytree(settings.models_dir / "reranker", source)
    with open(source / "model.onnx", "ab") as f:
        f.write(b"\0")
    with pytest.raises(ModelUnavailable, match="sha256"):
        build_gpu_repository(settings, tmp_path / "out", OPTS, source=source)


@pytest.mark.parametrize("bad", [
    {"gpus": ()}, {"max_queue_delay_us": 10_000_000}, {"max_queue_size": 0},
    {"preferred_batch_sizes": (512,)}, {"precision": "INT4"},
])
def test_bad_options_are_rejected(bad):
    with pytest.raises(ValueError):
        GpuOptions(**bad)


def test_cli_writes_the_repository(settings, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from hybridsearch.cli import app
    from hybridsearch.config.settings import get_settings

    monkeypatch.setenv("HYBRIDSEARCH_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("HYBRIDSEARCH_MODELS_DIR", str(settings.models_dir))
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(app, ["triton-repository", "--target", "gpu", "--out", str(tmp_path / "r"),
                                          "--gpus", "0,1", "--max-queue-delay-us", "500"])
        bad = CliRunner().invoke(app, ["triton-repository", "--out", str(tmp_path / "x"), "--max-queue-size", "0"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    onnx = parse(tmp_path / "r" / "reranker_onnx" / "config.pbtxt")
    assert list(onnx.instance_group[0].gpus) == [0, 1]
    assert onnx.dynamic_batching.max_queue_delay_microseconds == 500
    assert bad.exit_code == 2 and not (tmp_path / "x").exists()


@pytest.fixture(scope="module")
def triton_python_steps(repo, settings):
    """A real tritonserver (CPU) on the GPU repository, loading only the python-backend steps."""
    import tritonclient.grpc as grpcclient

    out, _ = repo
    cmd, env = triton_command(settings)
    cmd = [a for a in cmd if not a.startswith("--model-repository=")] + [
        f"--model-repository={out}", "--model-control-mode=explicit",
        "--load-model=reranker_tokenize", "--load-model=reranker_score",
    ]
    log = open(settings.data_dir / "triton-gpu-steps.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{GRPC_PORT}")
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if client.is_model_ready("reranker_tokenize") and client.is_model_ready("reranker_score"):
                    break
            except Exception:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                tail = (settings.data_dir / "triton-gpu-steps.log").read_text()[-3000:]
                pytest.fail(f"tritonserver did not load the steps:\n{tail}")
            time.sleep(0.5)
        yield client
    finally:
        client.close()
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_python_steps_in_triton_reproduce_the_cpu_scores(triton_python_steps, repo, settings):
    """tokenize (Triton) -> the GPU repository's model.onnx (ONNX Runtime, CPU) -> score (Triton) gives
    the scores of the CPU path (export.onnx_scorer, which the CPU model's code mirrors)."""
    import tritonclient.grpc as grpcclient

    out, _ = repo
    query = "what causes the seasons on earth"
    passages = ["The tilt of Earth's axis causes the seasons.", "Bananas are rich in potassium.",
                "Seasons happen because the axis is tilted relative to the orbit " * 20, ""]
    n = len(passages)
    inputs = [grpcclient.InferInput("query", [n, 1], "BYTES"), grpcclient.InferInput("passage", [n, 1], "BYTES")]
    inputs[0].set_data_from_numpy(np.array([[query.encode()]] * n, dtype=np.object_))
    inputs[1].set_data_from_numpy(np.array([[p.encode()] for p in passages], dtype=np.object_))
    tokens = triton_python_steps.infer("reranker_tokenize", inputs)
    feed = {name: tokens.as_numpy(name) for name in ("input_ids", "attention_mask", "token_type_ids")}
    manifest = json.loads((out / "reranker_tokenize" / "1" / "manifest.json").read_text())
    assert all(v.shape == (n, manifest["max_length"]) and v.dtype == np.int64 for v in feed.values())
    tokenizer = Tokenizer.from_file(str(out / "reranker_tokenize" / "1" / "tokenizer.json"))
    first = tokenizer.encode(query, passages[0]).ids
    assert feed["input_ids"][0, : len(first)].tolist() == first and not feed["input_ids"][0, len(first):].any()

    session = ort.InferenceSession(str(out / "reranker_onnx" / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    logits = session.run(None, feed)[0].astype(np.float32)
    score_in = grpcclient.InferInput("logits", list(logits.shape), "FP32")
    score_in.set_data_from_numpy(logits)
    scores = triton_python_steps.infer("reranker_score", [score_in]).as_numpy("score").reshape(-1)

    expected = 1.0 / (1.0 + np.exp(-np.array(onnx_scorer(settings.models_dir / "reranker", manifest["max_length"])(
        query, passages, batch=n))))
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    assert scores[0] > scores[1]  # and it still ranks: the relevant passage above the unrelated one
