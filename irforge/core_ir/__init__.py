"""The neutral graph IR: types, values, nodes, graphs, text form, verifier and interpreter.

Imports only numpy and onnx (for schemas and reference kernels), never a frontend or backend.
"""

from .attributes import Attr, AttrKind, SparseTensor, infer_attr
from .builder import Builder, NameGenerator
from .clone import clone_graph, clone_model
from .dtypes import DataType
from .equality import graphs_equal, models_equal, structural_diff
from .errors import (
    ExportError,
    ExternalDataError,
    InterpreterError,
    IRError,
    IrforgeError,
    LoadError,
    MissingExtraError,
    ParseError,
    Problem,
    VerificationError,
)
from .graph import Graph
from .interpreter import interpret, register_kernel
from .journal import InjectedFailure, Journal
from .model import Function, Model
from .node import Node
from .parser import parse, parse_graph, parse_model
from .printer import print_graph, print_model, write_model
from .tensors import ExternalTensor, NumpyTensor, ProtoTensor, TensorData
from .types import (
    Dim,
    MapType,
    OptionalType,
    SequenceType,
    Shape,
    SparseTensorType,
    TensorType,
    Type,
)
from .value import Value
from .verifier import verify, verify_model

__all__ = [
    "Attr", "AttrKind", "Builder", "DataType", "Dim", "ExportError", "ExternalDataError",
    "ExternalTensor", "Function", "Graph", "IRError", "InjectedFailure", "InterpreterError", "IrforgeError", "Journal",
    "LoadError", "MapType", "MissingExtraError", "Model", "NameGenerator", "Node", "NumpyTensor",
    "OptionalType", "ParseError", "Problem", "ProtoTensor", "SequenceType", "Shape",
    "SparseTensor", "SparseTensorType", "TensorData", "TensorType", "Type", "Value",
    "VerificationError", "clone_graph", "clone_model", "graphs_equal", "infer_attr",
    "interpret", "models_equal", "parse", "parse_graph", "parse_model", "print_graph",
    "print_model", "register_kernel", "structural_diff", "verify", "verify_model", "write_model",
]  # fmt: skip
