"""libcoil's C interface (include/coil/c_api.h) through ctypes, and tensors across it as DLPack
capsules: no copies, each side's memory owned by that side until the other lets go."""
import ctypes
import json
import os
import threading

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
_lib.coil_function_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                   ctypes.c_void_p, ctypes.c_size_t]
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


_to_dlpack, _from_dlpack = torch.utils.dlpack.to_dlpack, torch.utils.dlpack.from_dlpack
_get_pointer, _set_name, _new_capsule = (_py.PyCapsule_GetPointer, _py.PyCapsule_SetName,
                                         _py.PyCapsule_New)
_run = _lib.coil_function_run


def _export(t):
    """`t`'s DLPack tensor, handed to coil (which calls its deleter): bool as uint8, which
    PyTorch 1.13's DLPack lacks."""
    if t.dtype is torch.bool:
        t = t.view(torch.uint8)
    capsule = _to_dlpack(t)
    pointer = _get_pointer(capsule, _DLTENSOR)
    _set_name(capsule, _USED)  # consumed: the capsule no longer frees it
    return pointer


def _import(pointer, dtype):
    t = _from_dlpack(_new_capsule(pointer, _DLTENSOR, None))
    return t.view(torch.bool) if dtype is torch.bool and t.dtype is torch.uint8 else t


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
        self._arrays = threading.local()

    def __call__(self, *inputs):
        n = len(inputs)
        arrays = self._arrays.__dict__.get(n)  # this thread's, made once (they cost microseconds)
        if arrays is None:
            arrays = self._arrays.__dict__[n] = ((ctypes.c_void_p * max(n, 1))(),
                                                 (ctypes.c_void_p * max(self.num_outputs, 1))())
        ins, outs = arrays
        for k, t in enumerate(inputs):
            ins[k] = _export(t)
        if _run(self._handle, ins, n, outs, self.num_outputs) != 0:
            raise _error()
        return list(map(_import, outs[:self.num_outputs], self._output_dtypes))

    def __del__(self):
        if getattr(self, "_handle", None):
            _lib.coil_function_free(self._handle)
            self._handle = None
