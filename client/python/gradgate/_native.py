"""ctypes bindings of libgradgate's C interface (gradgate/client.h).

Finding the library: the path in the environment variable GRADGATE_LIBRARY if it is set (and
nothing else then, so that a wrong path is reported rather than silently replaced); otherwise
  1. libgradgate.so next to this package's files;
  2. build/client/libgradgate.so of a source tree that holds this package (searched upwards
     from this file, so a checkout works without installing anything);
  3. ctypes.util.find_library("gradgate") (the system's library path).
If none loads, LibraryNotFound lists every place tried and why each failed.

The library is loaded once, on first use, so that importing the package never fails.
"""

import ctypes
import ctypes.util
import os
import threading
from pathlib import Path

LIBRARY_ENV = "GRADGATE_LIBRARY"
LIBRARY_FILE = "libgradgate.so"
_SOURCE_TREE_LIBRARY = Path("build") / "client" / LIBRARY_FILE


class LibraryNotFound(ImportError):
    """libgradgate could not be loaded from any of the places searched."""


class JobInfo(ctypes.Structure):
    _fields_ = [
        ("node_rank", ctypes.c_uint32),
        ("nodes", ctypes.c_uint32),
        ("local_workers", ctypes.c_uint32),
        ("world_size", ctypes.c_uint32),
    ]


class AllreduceInfo(ctypes.Structure):
    _fields_ = [
        ("step", ctypes.c_uint64),
        ("raw_bytes", ctypes.c_uint64),
        ("wire_bytes", ctypes.c_uint64),
        ("encode_seconds", ctypes.c_double),
        ("communicate_seconds", ctypes.c_double),
        ("decode_seconds", ctypes.c_double),
    ]


class CudaBuffer(ctypes.Structure):
    """gg_cuda_buffer: where a tensor lies in this process's GPU memory."""

    _fields_ = [
        ("device_uuid", ctypes.c_uint8 * 16),
        ("memory_handle", ctypes.c_uint8 * 64),
        ("offset", ctypes.c_uint64),
        ("ready_event_handle", ctypes.c_uint8 * 64),
    ]


GG_OK = 0
GG_TIMEOUT = 4

# Opaque handles: gg_client*, gg_tensor*, gg_request*.
ClientHandle = ctypes.c_void_p
TensorHandle = ctypes.c_void_p
RequestHandle = ctypes.c_void_p

_PROTOTYPES = {
    "gg_last_error": (ctypes.c_char_p, []),
    "gg_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "gg_codec_name": (ctypes.c_char_p, [ctypes.c_int]),
    "gg_connect": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(ClientHandle)]),
    "gg_connect_wait": (
        ctypes.c_int,
        [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ClientHandle)],
    ),
    "gg_job": (ctypes.c_int, [ClientHandle, ctypes.POINTER(JobInfo)]),
    "gg_collective_timeout": (ctypes.c_int, [ClientHandle, ctypes.POINTER(ctypes.c_uint32)]),
    "gg_close": (ctypes.c_int, [ClientHandle]),
    "gg_release": (ctypes.c_int, [TensorHandle]),
    "gg_declare": (
        ctypes.c_int,
        [
            ClientHandle,
            ctypes.c_char_p,
            ctypes.c_uint64,
            ctypes.c_int,
            ctypes.c_uint64,
            ctypes.c_uint64,
            ctypes.c_double,
            ctypes.POINTER(TensorHandle),
        ],
    ),
    "gg_declare_cuda": (
        ctypes.c_int,
        [
            ClientHandle,
            ctypes.c_char_p,
            ctypes.c_uint64,
            ctypes.c_int,
            ctypes.c_uint64,
            ctypes.c_uint64,
            ctypes.c_double,
            ctypes.POINTER(CudaBuffer),
            ctypes.POINTER(TensorHandle),
        ],
    ),
    "gg_tensor_data": (ctypes.c_void_p, [TensorHandle]),
    "gg_tensor_bytes": (ctypes.c_size_t, [TensorHandle]),
    "gg_allreduce": (ctypes.c_int, [TensorHandle, ctypes.POINTER(RequestHandle)]),
    "gg_wait": (ctypes.c_int, [RequestHandle, ctypes.c_int64, ctypes.POINTER(AllreduceInfo)]),
    "gg_tensor_codec": (ctypes.c_int, [TensorHandle, ctypes.POINTER(ctypes.c_int)]),
}

_lock = threading.Lock()
_library = None


def candidate_paths():
    """The places searched for the library, in order: (where, path or None if nothing to try)."""
    from_env = os.environ.get(LIBRARY_ENV)
    if from_env:
        return [(f"${LIBRARY_ENV}", from_env)]
    package_dir = Path(__file__).resolve().parent
    built = (parent / _SOURCE_TREE_LIBRARY for parent in package_dir.parents)
    in_tree = next((path for path in built if path.exists()), None)
    return [
        (f"next to the package ({package_dir})", str(package_dir / LIBRARY_FILE)),
        (f"a source tree's {_SOURCE_TREE_LIBRARY} above the package", in_tree and str(in_tree)),
        ('ctypes.util.find_library("gradgate")', ctypes.util.find_library("gradgate")),
    ]


def _load():
    tried = []
    for where, path in candidate_paths():
        if path is None:
            tried.append(f"  {where}: none found")
            continue
        if os.sep in path and not os.path.exists(path):
            tried.append(f"  {where}: {path}: no such file")
            continue
        try:
            loaded = ctypes.CDLL(path)
        except OSError as error:
            tried.append(f"  {where}: {path}: {error}")
            continue
        missing = [name for name in _PROTOTYPES if not hasattr(loaded, name)]
        if missing:
            tried.append(f"  {where}: {path}: lacks {', '.join(missing)}")
            continue
        for name, (restype, argtypes) in _PROTOTYPES.items():
            function = getattr(loaded, name)
            function.restype = restype
            function.argtypes = argtypes
        return loaded
    raise LibraryNotFound(
        f"libgradgate could not be loaded (set {LIBRARY_ENV} to its path); tried:\n"
        + "\n".join(tried)
    )


def library():
    """The loaded library with its prototypes set; loads it on the first call."""
    global _library
    with _lock:
        if _library is None:
            _library = _load()
        return _library
