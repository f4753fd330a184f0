"""streamlint: a static linter for multi-stream model code (TorchAir, torch_npu, npugraph_ex, CUDA)."""

__version__ = "0.1.0"
