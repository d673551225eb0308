"""PyTorch Inductor's static CUDA launcher runs tegula's kernels (`runtime/static_launch`):
the cubin is left where Triton's cache holds it, for exactly the kernels whose
parameters are what that launcher passes; `ASTSource.constants` and
`triton.runtime.cache._base32` are Triton's; the `triton` facade keeps what it read."""
from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.runtime.cache_manager import _base32
from tegula.runtime.source import ASTSource

ROOT = Path(__file__).resolve().parents[2]
HOPPER = GPUTarget("cuda", 90, 32)


@tegula.jit
def scale_rows(in_ptr, unused_ptr, out_ptr, xnumel, stride: tl.constexpr, scale, flag, XBLOCK: tl.constexpr):
    offs = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    mask = offs < xnumel
    x = tl.load(in_ptr + offs * stride, mask)
    tl.store(out_ptr + offs, tl.where(flag, x * scale, x), mask)


SIGNATURE = {"in_ptr": "*fp32", "unused_ptr": "*fp32", "out_ptr": "*fp32", "xnumel": "i32", "stride": "constexpr",
             "scale": "fp32", "flag": "i1", "XBLOCK": "constexpr"}


def _compile(cache_dir, monkeypatch, signature=SIGNATURE, **options):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache_dir))
    src = ASTSource(scale_rows, signature, {"stride": 1, "XBLOCK": 128}, {"in_ptr": 16, "out_ptr": 16})
    return tegula.compile(src, target=HOPPER, options={"num_warps": 4, **options})


def _left_cubin(cache_dir, kernel):
    return Path(cache_dir, _base32(kernel.hash), f"{kernel.name}.cubin")


def test_cubin_left_where_triton_keeps_it(tmp_path, monkeypatch):
    kernel = _compile(tmp_path, monkeypatch)
    path = _left_cubin(tmp_path, kernel)
    assert path.read_bytes() == kernel.asm["cubin"]
    # the kernel's parameters are the signature's non-constexpr arguments, in order
    entry = re.search(r"\.entry\s+scale_rows\((.*?)\)", kernel.asm["ptx"], re.S).group(1)
    params = re.findall(r"\.param\s+\.(\w+)", entry)
    assert params == ["u64", "u64", "u64", "u32", "f32", "u32"]  # bool as a 32-bit int, as Triton passes it
    # a second compile (the disk cache's copy) leaves it in a fresh folder too
    other = tmp_path / "other"
    again = _compile(other, monkeypatch)
    assert again.hash == kernel.hash and _left_cubin(other, again).read_bytes() == kernel.asm["cubin"]


def test_no_cubin_for_kernels_with_other_parameters(tmp_path, monkeypatch):
    # checked mode: an error buffer and extents after the kernel's own parameters
    checked = _compile(tmp_path / "checked", monkeypatch, checked=True)
    assert not _left_cubin(tmp_path / "checked", checked).exists()
    # a 16-bit float scalar: the static launcher passes float scalars as 32 bits
    half = _compile(tmp_path / "half", monkeypatch, signature={**SIGNATURE, "scale": "fp16"})
    assert half.asm.get("cubin") and not _left_cubin(tmp_path / "half", half).exists()


def test_no_cubin_for_tensor_descriptors(tmp_path, monkeypatch):
    @tegula.jit
    def copy_block(desc, out_ptr, BLOCK: tl.constexpr):
        x = desc.load([0, 0])
        tl.store(out_ptr + tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :], x)

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    src = ASTSource(copy_block, {"desc": "tensordesc<fp16[64, 64]>", "out_ptr": "*fp16", "BLOCK": "constexpr"},
                    {"BLOCK": 64})
    kernel = tegula.compile(src, target=HOPPER, options={"num_warps": 4})
    assert kernel.asm.get("cubin") and not any(tmp_path.rglob("*.cubin"))


STATIC = textwrap.dedent('''
    import sys
    from pathlib import Path
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from torch._inductor.runtime.runtime_utils import triton_hash_to_path_key
    from torch._inductor.runtime.static_triton_launcher import StaticallyLaunchedCudaKernel

    sys.path.insert(0, sys.argv[2])
    from test_static_launch import SIGNATURE, scale_rows  # this file's kernel, under compat

    src = ASTSource(scale_rows, SIGNATURE, {"stride": 1, "XBLOCK": 128})
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    # where Inductor looks (its can_statically_launch), then what it builds from the kernel
    path = Path(sys.argv[1], triton_hash_to_path_key(kernel.hash), "scale_rows.cubin")
    assert path.read_bytes() == kernel.asm["cubin"]
    kernel._cubin_path = str(path)
    static = StaticallyLaunchedCudaKernel(kernel)
    assert static.arg_tys == "OOOifi", static.arg_tys  # three pointers, xnumel, scale, flag
    assert sorted(static.full_constexprs) == [4, 7] and not static.has_global_scratch
    assert static.num_warps == 4 and static.shared == kernel.metadata.shared
    print("OK")
''')


def test_static_launcher_reads_the_kernel_as_triton_s(tmp_path):
    """PyTorch's own StaticallyLaunchedCudaKernel, built from a tegula kernel under
    compat, finds the cubin by the kernel's hash and packs one argument per parameter."""
    pytest.importorskip("torch._inductor.runtime.static_triton_launcher")
    script = tmp_path / "static.py"
    script.write_text(STATIC)
    result = _run_compat(script, tmp_path / "cache", Path(__file__).parent, TRITON_CACHE_DIR=str(tmp_path / "cache"))
    assert result.returncode == 0 and result.stdout.strip().endswith("OK"), result.stderr[-3000:]


def test_constants_and_base32_are_triton_s():
    src = ASTSource(scale_rows, SIGNATURE, {"stride": 1, "XBLOCK": 128})
    assert src.constants == {(4,): 1, (7,): 128}
    digest = "47d9a896c951a0eab110d355b68fb0d7d7eac8ecfc05d3cc770f40775eaea856"
    assert _base32(digest) == base64.b32encode(bytes.fromhex(digest)).decode().rstrip("=")


FACADE = textwrap.dedent('''
    import triton, tegula
    from triton.runtime.cache import _base32
    assert triton.set_allocator is tegula.set_allocator
    assert "set_allocator" in vars(triton)              # kept after the first read
    def mine(size, alignment, stream):
        return None
    tegula.set_allocator = mine                        # tegula's attribute changes...
    assert triton.set_allocator is mine                # ...and the facade's copy with it
    triton.set_allocator = print                       # the facade's assignments reach tegula
    assert tegula.set_allocator is print and triton.set_allocator is print
    del tegula.set_allocator
    assert not hasattr(triton, "set_allocator")
    assert triton.__version__ == "3.6.0" and tegula.__version__ != "3.6.0"
    print("OK")
''')


def test_facade_keeps_what_it_read_in_step_with_tegula(tmp_path):
    script = tmp_path / "facade.py"
    script.write_text(FACADE)
    result = _run_compat(script)
    assert result.returncode == 0 and result.stdout.strip() == "OK", result.stderr


def _run_compat(script, *args, **env):
    full_env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    return subprocess.run([sys.executable, "-m", "tegula.compat", str(script), *map(str, args)], env=full_env,
                          capture_output=True, text=True, timeout=300)
