"""Triton python-backend model: tokenise (query, passage) pairs, run the ONNX cross-encoder,
return sigmoid(logit) per pair. Files next to this one: model.onnx, tokenizer.json, manifest.json."""

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer

# The length the model was trained with (manifest) unless the environment overrides it.
DEFAULT_MAX_LENGTH = 256
CHUNK = 32  # pairs per ONNX run: bounds padding waste and memory


class TritonPythonModel:
    def initialize(self, args):
        folder = Path(args["model_repository"]) / args["model_version"]
        manifest = json.loads((folder / "manifest.json").read_text())
        digest = hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest()
        if digest != manifest["sha256"]:
            raise pb_utils.TritonModelException(f"model.onnx sha256 {digest} != manifest {manifest['sha256']}")
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        max_length = int(os.environ.get("HYBRIDSEARCH_RERANK_MAX_LENGTH", manifest.get("max_length", DEFAULT_MAX_LENGTH)))
        self.tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")  # long queries (ArguAna) must not fail
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(os.environ.get("HYBRIDSEARCH_RERANK_THREADS", "2"))
        self.session = ort.InferenceSession(str(folder / "model.onnx"), opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}

    def _scores(self, queries, passages):
        out = np.zeros(len(queries), dtype=np.float32)
        order = np.argsort([len(p) for p in passages])
        for start in range(0, len(order), CHUNK):
            idx = order[start : start + CHUNK]
            enc = self.tokenizer.encode_batch([(queries[i], passages[i]) for i in idx])
            feed = {
                "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
            }
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.array([e.type_ids for e in enc], dtype=np.int64)
            logits = self.session.run(None, feed)[0].reshape(len(idx), -1)[:, 0]
            out[idx] = 1.0 / (1.0 + np.exp(-logits))
        return out

    def execute(self, requests):
        queries, passages, sizes = [], [], []
        for request in requests:
            q = pb_utils.get_input_tensor_by_name(request, "query").as_numpy().reshape(-1)
            p = pb_utils.get_input_tensor_by_name(request, "passage").as_numpy().reshape(-1)
            queries += [x.decode("utf-8", "replace") for x in q]
            passages += [x.decode("utf-8", "replace") for x in p]
            sizes.append(len(q))
        scores = self._scores(queries, passages) if queries else np.zeros(0, dtype=np.float32)
        responses, start = [], 0
        for n in sizes:
            tensor = pb_utils.Tensor("score", scores[start : start + n].reshape(n, 1))
            responses.append(pb_utils.InferenceResponse(output_tensors=[tensor]))
            start += n
        return responses
