"""Export of a cross-encoder folder to ONNX fp32 + int8, and the sha256 pins on user folders."""

import json

import pytest

from hybridsearch.runtime.models import ModelUnavailable, minilm_dir, sha256_file
from hybridsearch.reranker.export import check_pins, export_trained, onnx_scorer


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    """MiniLM cut to one layer with a seeded classification head: small enough to export in seconds."""
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("xenc")
    model = AutoModelForSequenceClassification.from_pretrained(str(minilm_dir()), num_labels=1)
    model.bert.encoder.layer = model.bert.encoder.layer[:1]
    model.config.num_hidden_layers = 1
    model.save_pretrained(str(folder))
    AutoTokenizer.from_pretrained(str(minilm_dir())).save_pretrained(str(folder))
    return folder


def test_export_writes_fp32_and_int8_with_checked_manifests(tiny_cross_encoder):
    validation = [{"query": "what colour is the sky", "passages": ["the sky is blue", "grass grows", "cats purr"],
                   "positive": 0, "source": "toy"}]
    card = {"name": "tiny", "steps": 0, "config": {"max_length": 64}}
    manifests = export_trained(tiny_cross_encoder, card, validation)
    fp32, int8 = tiny_cross_encoder / "onnx-fp32", tiny_cross_encoder / "onnx-int8"
    assert manifests["fp32"]["sha256"] == sha256_file(fp32 / "model.onnx")
    assert manifests["int8"]["sha256"] == sha256_file(int8 / "model.onnx")
    assert (int8 / "model.onnx").stat().st_size < 0.5 * (fp32 / "model.onnx").stat().st_size
    on_disk = json.loads((int8 / "manifest.json").read_text())
    assert on_disk["max_length"] == 64 and on_disk["trained"] is True
    assert 0.0 < on_disk["onnx_validation_mrr10"]["all"] <= 1.0
    # int8 stays close to fp32 on the same pairs
    pairs = validation[0]["passages"]
    a = onnx_scorer(fp32, 64)(validation[0]["query"], pairs, 8)
    b = onnx_scorer(int8, 64)(validation[0]["query"], pairs, 8)
    assert max(abs(x - y) for x, y in zip(a, b)) < 0.5


def test_user_folder_must_be_pinned(tiny_cross_encoder, tmp_path):
    with pytest.raises(ModelUnavailable, match="pin the files"):
        check_pins(tiny_cross_encoder, None)
    files = [p for p in tiny_cross_encoder.iterdir() if p.is_file() and p.suffix in (".safetensors", ".json", ".txt")]
    pins = tmp_path / "pins.sha256"
    pins.write_text("".join(f"{sha256_file(p)}  {p.name}\n" for p in files))
    check_pins(tiny_cross_encoder, pins)  # all match
    pins.write_text(pins.read_text().replace(sha256_file(files[0]), "0" * 64))
    with pytest.raises(ModelUnavailable, match="does not match"):
        check_pins(tiny_cross_encoder, pins)
