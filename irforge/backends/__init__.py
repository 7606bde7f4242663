"""Backends: the IR out to ONNX, StableHLO, XLA and TVM Relax."""
