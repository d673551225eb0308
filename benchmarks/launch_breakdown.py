"""Where the host time of a launch goes, on the GPU machine: the floor (cuLaunchKernel
through cuda-bindings or ctypes, with the stream passed in different forms), the pieces
tegula's launch path adds (tensor attributes, the current stream, slot writes), and the
whole `kernel[grid](...)` of tegula and Triton, all in one process.

Usage (device tool, repository root):  PYTHONPATH=$PWD python3 benchmarks/launch_breakdown.py
"""
from __future__ import annotations

import ctypes
import json
import sys

import torch


def main() -> None:
    from cuda.bindings import driver as cu

    sys.path.insert(0, ".")
    from benchmarks.load import load_tegula_kernels, load_triton_kernels
    from benchmarks.run_gpu import host_time_per_launch as per_call_us

    tg = load_tegula_kernels()
    x, y = torch.randn(16, device="cuda"), torch.randn(16, device="cuda")
    o = torch.empty_like(x)
    res: dict[str, float] = {}
    compiled = tg.add_kernel.warmup(x, y, o, 16, grid=(1,), BLOCK=16)
    tg.add_kernel[(1,)](x, y, o, 16, BLOCK=16)
    err, mod = cu.cuModuleLoadData(compiled.asm["cubin"])
    assert err == cu.CUresult.CUDA_SUCCESS, err
    err, fn = cu.cuModuleGetFunction(mod, compiled.metadata.name.encode())
    slots = [ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()]
    arr = (ctypes.c_void_p * 4)(*[ctypes.addressof(s) for s in slots])
    addr = ctypes.addressof(arr)
    slots[0].value, slots[1].value, slots[2].value, slots[3].value = x.data_ptr(), y.data_ptr(), o.data_ptr(), 16
    threads = 32 * compiled.metadata.num_warps
    stream_int = torch.cuda.current_stream().cuda_stream
    stream_obj = cu.CUstream(stream_int)
    launch = cu.cuLaunchKernel
    res["bindings_stream_int"] = per_call_us(lambda: launch(fn, 1, 1, 1, threads, 1, 1, 0, stream_int, addr, 0))
    res["bindings_stream_obj"] = per_call_us(lambda: launch(fn, 1, 1, 1, threads, 1, 1, 0, stream_obj, addr, 0))
    libcuda = ctypes.CDLL("libcuda.so.1")
    c_launch = libcuda.cuLaunchKernel
    c_launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    c_launch.restype = ctypes.c_int
    fn_int = int(fn)
    res["ctypes_argtypes"] = per_call_us(lambda: c_launch(fn_int, 1, 1, 1, threads, 1, 1, 0, stream_int, addr, None))
    raw = torch._C._cuda_getCurrentRawStream
    res["getCurrentRawStream"] = per_call_us(lambda: raw(0))
    res["three_data_ptr"] = per_call_us(lambda: (x.data_ptr(), y.data_ptr(), o.data_ptr()))
    res["three_dtype_getdevice"] = per_call_us(lambda: (x.dtype, x.get_device(), y.dtype, y.get_device(),
                                                         o.dtype, o.get_device()))
    s0 = slots[0]
    res["four_slot_writes"] = per_call_us(lambda: (setattr(s0, "value", 1), setattr(s0, "value", 2),
                                                    setattr(s0, "value", 3), setattr(s0, "value", 4)))
    k = compiled
    launcher = k._launch
    vals = (x, y, o, 16, 16)
    px, py, po = x.data_ptr(), y.data_ptr(), o.data_ptr()
    res["tegula_launcher_only"] = per_call_us(lambda: launcher((1, 1, 1), vals, px, py, po, None, None))
    res["tegula_launcher_no_addresses"] = per_call_us(lambda: launcher((1, 1, 1), vals))
    res["tegula_kernel_grid"] = per_call_us(lambda: tg.add_kernel[(1,)](x, y, o, 16, BLOCK=16))
    runner = tg.add_kernel._runner
    res["tegula_runner_direct"] = per_call_us(lambda: runner((1,), x, y, o, 16, BLOCK=16))
    try:
        tr = load_triton_kernels()
        tr.add_kernel[(1,)](x, y, o, 16, BLOCK=16)
        res["triton_kernel_grid"] = per_call_us(lambda: tr.add_kernel[(1,)](x, y, o, 16, BLOCK=16))
    except Exception as ex:  # Triton is the reference; report why it is missing
        print("triton unavailable:", repr(ex)[:200])
    res["torch_add"] = per_call_us(lambda: torch.add(x, y, out=o))
    print(json.dumps(res, indent=1))
    width = max(len(k) for k in res)
    for name, us in res.items():
        print(f"{name:<{width}}  {us:7.3f} µs")


if __name__ == "__main__":
    main()
