"""Frontends: importers from ONNX, PyTorch (torch.export) and JAX (jaxpr) into the IR."""
