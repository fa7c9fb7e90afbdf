"""The python-backend steps around the ONNX model in the GPU repository's ensemble (gpu_repository.py).

Copied as 1/model.py into two models; the config parameter `step` picks what it does:
- tokenize: (query, passage) strings -> input_ids, attention_mask, token_type_ids, padded to the fixed
  max_length the ONNX model's TensorRT profile is built for (every request has the same shape, so the
  dynamic batcher can merge any of them);
- score: logits -> sigmoid(logit), the score the CPU model (model_repository/reranker/1/model.py) returns.
Runs only inside Triton (triton_python_backend_utils); tests load it in a real tritonserver.
"""

import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.step = params["step"]
        if self.step == "tokenize":
            folder = Path(args["model_repository"]) / args["model_version"]
            self.max_length = int(params["max_length"])
            self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            # Same truncation as the CPU model; padding to one fixed length instead of the batch's longest.
            self.tokenizer.enable_truncation(max_length=self.max_length, strategy="longest_first")
            self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]", length=self.max_length)
        elif self.step != "score":
            raise pb_utils.TritonModelException(f"unknown step {self.step!r} (tokenize | score)")

    def _tokenize(self, request):
        queries = pb_utils.get_input_tensor_by_name(request, "query").as_numpy().reshape(-1)
        passages = pb_utils.get_input_tensor_by_name(request, "passage").as_numpy().reshape(-1)
        enc = self.tokenizer.encode_batch(
            [(q.decode("utf-8", "replace"), p.decode("utf-8", "replace")) for q, p in zip(queries, passages)]
        )
        return [
            pb_utils.Tensor("input_ids", np.array([e.ids for e in enc], dtype=np.int64)),
            pb_utils.Tensor("attention_mask", np.array([e.attention_mask for e in enc], dtype=np.int64)),
            pb_utils.Tensor("token_type_ids", np.array([e.type_ids for e in enc], dtype=np.int64)),
        ]

    def _score(self, request):
        logits = pb_utils.get_input_tensor_by_name(request, "logits").as_numpy().astype(np.float32)
        return [pb_utils.Tensor("score", (1.0 / (1.0 + np.exp(-logits))).astype(np.float32))]

    def execute(self, requests):
        run = self._tokenize if self.step == "tokenize" else self._score
        return [pb_utils.InferenceResponse(output_tensors=run(request)) for request in requests]
