# Type stubs of strideweave.hf (see strideweave/__init__.pyi); the module
# needs torch and transformers 5.
from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar

from typing_extensions import TypeAlias

import torch
from transformers.models.auto.modeling_auto import _BaseModelWithGenerate

from .. import Runtime, _StrPath

__all__ = ["from_pretrained", "offload_experts", "quantize_experts", "stats", "release", "IMPLEMENTATION",
           "MEMORY_SLACK_BYTES", "QUANTIZED_TYPES"]

IMPLEMENTATION: Final = "strideweave"
MEMORY_SLACK_BYTES: Final[int]
QUANTIZED_TYPES: Final[tuple[str, ...]]

_Model = TypeVar("_Model", bound=torch.nn.Module)
_Tier: TypeAlias = Literal["direct", "page-cache", "zstd", "remote"]
# torch.float32, torch.float16, torch.bfloat16 or their names ("bfloat16", "bf16", "half", ...).
_DType: TypeAlias = torch.dtype | str

# The model of the class config.json names, as transformers' AutoModelForCausalLM
# types the models it makes (a PreTrainedModel with GenerationMixin's generate).
def from_pretrained(model_dir: _StrPath, *, budget: float = 0.25, tier: _Tier = "direct", dtype: _DType | None = None,
                    prefetch: bool | None = None, runtime: Runtime | None = None,
                    remote_endpoints: list[str] | str | None = None,
                    experts_gguf: _StrPath | None = None) -> _BaseModelWithGenerate: ...
def offload_experts(model: _Model, model_dir: _StrPath, *, budget: float = 0.25, tier: _Tier = "direct",
                    dtype: _DType | None = None, prefetch: bool | None = None,
                    runtime: Runtime | None = None, remote_endpoints: list[str] | str | None = None,
                    experts_gguf: _StrPath | None = None) -> _Model: ...
# The GGUF file written (out, else MODEL_DIR/experts-<qtype>.gguf).
def quantize_experts(model_dir: _StrPath, qtype: Literal["q8_0", "q4_0", "q4_k", "q6_k", "mxfp4"], *,
                     out: _StrPath | None = None, force: bool = False,
                     progress: Callable[[str], object] | None = None) -> str: ...
# {"layers": [one dict per MoE layer], "total": {...}} (docs/transformers.md).
def stats(model: torch.nn.Module) -> dict[str, Any]: ...
def release(model: torch.nn.Module) -> None: ...
