"""tessera_torch: PyTorch modules in and out of Tessera (docs/pytorch.md).

Python only converts: `python3 -m tessera_torch import` traces an
nn.Module with torch.fx and writes a Tessera job and its weights; the
training is Tessera's C++ (tessera_coordinator --init_weights), and
tessera_export --format=safetensors gives the state_dict back.
"""
from .convert import MODULES, InputSpec, Refusal, convert_module  # noqa: F401
