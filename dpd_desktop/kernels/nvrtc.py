"""Run-time compilation and launch of the package's CUDA C++ kernels (NVRTC + the CUDA driver API).

Through NVIDIA's own Python bindings (``cuda-bindings``: ``cuda.bindings.nvrtc`` / ``cuda.bindings.driver``; the
optional extra ``dpd-desktop[cuda]``), so a user with a CUDA build of PyTorch needs no compiler. A source file of
this folder is compiled once per (defines, device architecture) to a cubin for that architecture (``sm_90`` on an
H100/H200), cached in the user cache folder (``platformdirs.user_cache_dir("dpd-desktop")/kernels``, or
``$DPD_DESKTOP_KERNEL_CACHE``) under a key of the source's SHA-256, the options, the architecture and the NVRTC
version, written atomically; later processes load the cached cubin. :data:`LOAD_LOG` records each module's
compile / load seconds (the benchmark prints them).

Kernels are launched on PyTorch's current stream, so a CUDA graph being captured on that stream records them. Loading a
module is not allowed while a stream is being captured: :func:`module` raises then (load it before the capture,
as the trainer's warm-up iterations do).

Errors: :class:`KernelBuildError` (bindings missing, NVRTC compile failure with its log, driver errors).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import threading
import time
from pathlib import Path

import torch

from ..atomic import atomic_write_bytes

# cuda.bindings imported on first use: ~55 ms off every run (benchmarks/results/2026-12-04-notes-training.md)
driver = nvrtc = None
_IMPORT_ERROR: str | None = None

try:  # a core dependency; the GPU benchmark machine's image lacks it (then the XDG default below)
    from platformdirs import user_cache_dir
except ImportError:  # pragma: no cover
    user_cache_dir = None

HERE = Path(__file__).resolve().parent
POINTER, INT, FLOAT = ctypes.c_void_p, ctypes.c_int, ctypes.c_float  # the kernel-argument types of Module.launch
INSTALL_HINT = "install dpd-desktop[cuda] (NVIDIA's cuda-bindings and the NVRTC runtime)"

#: one entry per module made in this process: {"source", "defines", "arch", "compile_s" | None, "load_s", "cached"}
LOAD_LOG: list[dict] = []

_LOCK = threading.Lock()
_MODULES: dict[tuple, "Module"] = {}


class KernelBuildError(RuntimeError):
    """A kernel module could not be compiled, loaded or launched (the message says which step and why)."""


def bindings_error() -> str | None:
    """Import NVIDIA's CUDA bindings once; None when they are there, else why not (the ImportError's text)."""
    global driver, nvrtc, _IMPORT_ERROR
    if driver is None and _IMPORT_ERROR is None:
        try:
            from cuda.bindings import driver as _driver, nvrtc as _nvrtc
        except ImportError as exc:
            _IMPORT_ERROR = f"{type(exc).__name__}: {exc}"
        else:
            driver, nvrtc = _driver, _nvrtc
    return _IMPORT_ERROR


def cache_dir() -> Path:
    """The cubin cache folder: ``$DPD_DESKTOP_KERNEL_CACHE``, else the user cache folder's ``kernels``."""
    env = os.environ.get("DPD_DESKTOP_KERNEL_CACHE")
    if env:
        return Path(env)
    if user_cache_dir is not None:
        return Path(user_cache_dir("dpd-desktop")) / "kernels"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dpd-desktop" / "kernels"


def _check(result, what: str):
    """Unpack a cuda-bindings result tuple ``(err, *values)``; raise KernelBuildError when err is not success."""
    err, *values = result
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS if isinstance(err, nvrtc.nvrtcResult) else driver.CUresult.CUDA_SUCCESS
    if err != ok:
        if isinstance(err, driver.CUresult):
            _, name = driver.cuGetErrorName(err)
            raise KernelBuildError(f"{what} failed: {name.decode() if isinstance(name, bytes) else err}")
        raise KernelBuildError(f"{what} failed: {err}")
    return values[0] if len(values) == 1 else values


def nvrtc_version() -> tuple[int, int]:
    if bindings_error():
        raise KernelBuildError(f"the CUDA bindings are missing ({bindings_error()}): {INSTALL_HINT}")
    major, minor = _check(nvrtc.nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


def compile_cubin(source: str, name: str, options: list[str]) -> bytes:
    """Compile CUDA C++ ``source`` with NVRTC; returns the cubin. Raises KernelBuildError with the compiler log."""
    if bindings_error():
        raise KernelBuildError(f"the CUDA bindings are missing ({bindings_error()}): {INSTALL_HINT}")
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        opts = [o.encode() for o in options]
        err, = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            log = b" " * size
            _check(nvrtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
            raise KernelBuildError(f"NVRTC could not compile {name} ({' '.join(options)}):\n"
                                   f"{log.decode(errors='replace').strip()}")
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return cubin
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


class Module:
    """A loaded module of one source file and one set of defines, on one device (its primary context)."""

    def __init__(self, handle, functions: dict, device: torch.device, context):
        self.handle, self.functions, self.device, self.context = handle, functions, device, context
        self._context_int = int(context)

    def launch(self, name: str, grid: int | tuple[int, int], block: int, smem: int, args: tuple,
               types: tuple) -> None:
        """Launch kernel ``name`` on ``grid`` blocks (an int, or ``(x, y)``) of ``block`` threads with ``smem``
        dynamic shared bytes on PyTorch's current stream of this device. ``args``: tensors (passed as their data
        pointers; None → null pointer), Python ints and floats; ``types``: the ctypes type of each
        (``ctypes.c_void_p`` for pointers)."""
        values = tuple((0 if a is None else a.data_ptr()) if (a is None or isinstance(a, torch.Tensor)) else a
                       for a in args)
        stream = torch.cuda.current_stream(self.device).cuda_stream
        # autograd's device threads need not have made the context current (the caching allocator may have
        # served every tensor without a CUDA call): make PyTorch's primary context current for the driver call
        if int(_check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")) != self._context_int:
            _check(driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        gx, gy = (grid, 1) if isinstance(grid, int) else grid
        _check(driver.cuLaunchKernel(self.functions[name], gx, gy, 1, block, 1, 1, smem, stream,
                                     (values, types), 0), f"cuLaunchKernel({name})")


def _primary_context(device: torch.device):
    """The device's primary context (the one PyTorch's runtime uses), made current on this thread."""
    torch.cuda.init()
    with torch.cuda.device(device):
        torch.empty(1, device=device)  # the runtime has created the primary context by now
    dev = _check(driver.cuDeviceGet(device.index or 0), "cuDeviceGet")
    ctx = _check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    _check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


def module(source_file: str, defines: dict[str, int], device, functions: dict[str, int],
           options: tuple[str, ...] = ()) -> Module:
    """The module of ``source_file`` (a file of this folder) compiled with ``defines`` and the NVRTC ``options``
    for ``device``'s architecture, compiled or read from the cache on first use, then kept for the process.

    ``functions``: kernel name → dynamic shared-memory bytes it needs (the function's limit is raised to it on load).
    Raises KernelBuildError (bindings missing, compile error, a stream of the device is capturing, driver error).
    """
    device = torch.device(device)
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    key = (source_file, tuple(sorted(defines.items())), tuple(options), device.index)
    found = _MODULES.get(key)
    if found is not None:
        return found
    if bindings_error():
        raise KernelBuildError(f"the CUDA bindings are missing ({bindings_error()}): {INSTALL_HINT}")
    with _LOCK:
        found = _MODULES.get(key)
        if found is not None:
            return found
        if torch.cuda.is_current_stream_capturing():
            raise KernelBuildError(f"{source_file} is not loaded yet and a CUDA graph is being captured: run the "
                                   "model once before capturing")
        major, minor = torch.cuda.get_device_capability(device)
        arch = f"sm_{major}{minor}"
        source = (HERE / source_file).read_text()
        options = [f"--gpu-architecture={arch}", "--std=c++17", *options,
                   *(f"-D{k}={v}" for k, v in sorted(defines.items()))]
        nv = nvrtc_version()
        digest = hashlib.sha256("\0".join([source, *options]).encode()).hexdigest()[:24]
        path = cache_dir() / f"{Path(source_file).stem}-{digest}-{arch}-nvrtc{nv[0]}.{nv[1]}.cubin"
        entry = {"source": source_file, "defines": dict(defines), "arch": arch, "nvrtc": f"{nv[0]}.{nv[1]}",
                 "compile_s": None, "cached": path.is_file()}
        t0 = time.perf_counter()
        cubin = path.read_bytes() if entry["cached"] else None
        if cubin is None:
            cubin = compile_cubin(source, source_file, options)
            entry["compile_s"] = time.perf_counter() - t0
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(path, cubin)
            except OSError:  # a read-only cache folder costs a compile per process, nothing else
                entry["cache_write_failed"] = True
        t1 = time.perf_counter()
        ctx = _primary_context(device)
        image = ctypes.create_string_buffer(cubin, len(cubin))
        with torch.cuda.device(device):
            handle = _check(driver.cuModuleLoadData(ctypes.addressof(image)), f"cuModuleLoadData({path.name})")
            funcs = {}
            for name, smem in functions.items():
                fn = _check(driver.cuModuleGetFunction(handle, name.encode()), f"cuModuleGetFunction({name})")
                if smem:  # static + dynamic above 48 KiB needs the opt-in; set it for every dynamic size
                    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                    _check(driver.cuFuncSetAttribute(fn, attr, smem), f"cuFuncSetAttribute({name}, {smem} B)")
                funcs[name] = fn
        entry["load_s"] = time.perf_counter() - t1
        LOAD_LOG.append(entry)
        mod = Module(handle, funcs, device, ctx)
        _MODULES[key] = mod
        return mod

