"""coil from Python: a torch.compile backend.

    import coil, torch
    compiled = torch.compile(model, backend="coil")

`import coil` registers the Dynamo backend "coil" (compile_fx). compile_aten compiles one ATen
graph, as AOTAutograd's forward and backward compilers receive them; decompositions() is the
table to trace them with. docs/python.md says more."""
from ._capi import CoilError, Function
from .aten import decompositions
from .backend import compile_aten, compile_fx, fallback_counts

__all__ = ["CoilError", "Function", "compile_aten", "compile_fx", "decompositions",
           "fallback_counts"]


def _register():
    try:
        from torch._dynamo import register_backend
    except ImportError:  # PyTorch before 2.0 has no Dynamo
        return
    try:
        register_backend(name="coil")(compile_fx)
    except Exception:  # registered already (a second import under another name)
        pass


_register()
