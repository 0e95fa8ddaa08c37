"""libcoil's C interface (include/coil/c_api.h) through ctypes, and tensors across it as DLPack
capsules: no copies, each side's memory owned by that side until the other lets go."""
import ctypes
import json
import os

import torch
import torch.utils.dlpack

from . import _paths


def _find_library():
    for path in (os.environ.get("COIL_LIBRARY"), *_paths.LIBRARIES):
        if path and os.path.exists(path):
            return path
    raise ImportError(
        "coil: libcoil not found (looked at COIL_LIBRARY and %s); set COIL_LIBRARY to the "
        "library's path" % ", ".join(_paths.LIBRARIES))


_lib = ctypes.CDLL(_find_library())
_lib.coil_compile_graph.restype = ctypes.c_void_p
_lib.coil_compile_graph.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
_lib.coil_function_num_outputs.restype = ctypes.c_size_t
_lib.coil_function_num_outputs.argtypes = [ctypes.c_void_p]
_lib.coil_function_run.restype = ctypes.c_int
_lib.coil_function_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.c_size_t]
_lib.coil_function_free.restype = None
_lib.coil_function_free.argtypes = [ctypes.c_void_p]
_lib.coil_synchronize.restype = ctypes.c_int
_lib.coil_synchronize.argtypes = []
_lib.coil_last_error.restype = ctypes.c_char_p
_lib.coil_last_error.argtypes = []

_py = ctypes.pythonapi
_py.PyCapsule_GetPointer.restype = ctypes.c_void_p
_py.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_py.PyCapsule_SetName.restype = ctypes.c_int
_py.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_py.PyCapsule_New.restype = ctypes.py_object
_py.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# The capsules keep pointers to their names: these live as long as the module.
_DLTENSOR = ctypes.c_char_p(b"dltensor")
_USED = ctypes.c_char_p(b"used_dltensor")


class CoilError(RuntimeError):
    """A coil::Error raised through the C interface: its message names what was wrong."""


def _error():
    return CoilError(_lib.coil_last_error().decode())


def _export(t):
    """`t`'s DLPack tensor, handed to coil (which calls its deleter): bool as uint8, which
    PyTorch 1.13's DLPack lacks."""
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)
    capsule = torch.utils.dlpack.to_dlpack(t)
    pointer = _py.PyCapsule_GetPointer(capsule, _DLTENSOR)
    _py.PyCapsule_SetName(capsule, _USED)  # consumed: the capsule no longer frees it
    return pointer


def _import(pointer, dtype):
    t = torch.utils.dlpack.from_dlpack(_py.PyCapsule_New(pointer, _DLTENSOR, None))
    return t.view(torch.bool) if dtype == torch.bool and t.dtype == torch.uint8 else t


def synchronize():
    """Waits for the work coil queued on its GPU streams."""
    if _lib.coil_synchronize() != 0:
        raise _error()


class Function:
    """A graph in coil's text form, compiled: called on tensors, one per placeholder."""

    def __init__(self, text, options=None, output_dtypes=None):
        self._handle = _lib.coil_compile_graph(text.encode(),
                                               json.dumps(options or {}).encode())
        if not self._handle:
            raise _error()
        self.text = text
        self.num_outputs = _lib.coil_function_num_outputs(self._handle)
        self._output_dtypes = output_dtypes or [None] * self.num_outputs

    def __call__(self, *inputs):
        n = len(inputs)
        ins = (ctypes.c_void_p * max(n, 1))(*[_export(t) for t in inputs])
        outs = (ctypes.c_void_p * max(self.num_outputs, 1))()
        if _lib.coil_function_run(self._handle, ins, n, outs, self.num_outputs) != 0:
            raise _error()
        return [_import(outs[i], self._output_dtypes[i]) for i in range(self.num_outputs)]

    def __del__(self):
        if getattr(self, "_handle", None):
            _lib.coil_function_free(self._handle)
            self._handle = None
