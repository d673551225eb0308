"""`python -m tegula.compat script.py`: scripts written for `import triton` run unchanged."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np
    import triton
    import triton.language as tl
    from triton.runtime import driver
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import triton.testing
    import triton.runtime.jit

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)

    n = int(sys.argv[1])
    x = np.random.rand(n).astype(np.float32)
    y = np.random.rand(n).astype(np.float32)
    out = np.empty_like(x)
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=128)
    assert np.allclose(out, x + y)
    import tegula
    assert triton.jit is tegula.jit and tl is tegula.language and triton.language is tl
    assert triton.__version__ == tegula.__triton_version__ == "3.6.0" and tegula.__version__ != "3.6.0"
    assert triton.testing is tegula.testing
    assert isinstance(add_kernel, triton.runtime.jit.JITFunction)
    assert GPUTarget("cuda", 90, 32).arch == 90 and hasattr(driver, "active")
    assert __name__ == "__main__"
    print("OK", sys.argv[1:], tegula.language.__spec__.name)
''')


def _run(args, cwd, **env):
    full_env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    return subprocess.run([sys.executable, "-m", "tegula.compat", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=300)


def test_script_runs_unmodified(tmp_path):
    script = tmp_path / "triton_script.py"
    script.write_text(SCRIPT)
    result = _run([str(script), "1000", "--flag"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK ['1000', '--flag'] tegula.language"


def test_module_mode_and_script_directory_on_path(tmp_path):
    (tmp_path / "helper_mod.py").write_text("import triton\nVALUE = triton.cdiv(7, 2)\n")
    (tmp_path / "main_mod.py").write_text("import helper_mod, sys\nprint(helper_mod.VALUE, sys.argv[1:])\n")
    result = _run(["-m", "main_mod", "a"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "4 ['a']"


def test_command_mode(tmp_path):
    """`-c` as `python -c`: the command sees `triton` as tegula, argv[0] "-c", the
    current directory on the path."""
    (tmp_path / "helper_mod.py").write_text("VALUE = 3\n")
    result = _run(["-c", "import sys, triton, helper_mod; print(triton.cdiv(9, 2), helper_mod.VALUE, sys.argv)",
                   "x"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "5 3 ['-c', 'x']"
    assert _run(["-c"], cwd=tmp_path).returncode == 2


def test_missing_triton_module_names_both(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import triton.no_such_thing\n")
    result = _run([str(script)], cwd=tmp_path)
    assert result.returncode != 0
    assert "No module named 'triton.no_such_thing'" in result.stderr
    assert "tegula.no_such_thing" in result.stderr


def test_usage_and_missing_script(tmp_path):
    assert _run([], cwd=tmp_path).returncode == 2
    missing = _run([str(tmp_path / "nope.py")], cwd=tmp_path)
    assert missing.returncode == 2 and "can't open file" in missing.stderr


def test_install_in_process():
    from tegula import compat

    saved = {k: v for k, v in sys.modules.items() if k == "triton" or k.startswith("triton.")}
    try:
        compat.install()
        import triton
        import triton.language as tl
        from triton.compiler import compile as triton_compile

        import tegula
        assert triton.jit is tegula.jit and tl is tegula.language and triton.language is tl
        assert triton.__version__ == "3.6.0" and triton.__version__ >= "3.0.0"
        triton.some_flag = 1  # assignments reach tegula (one namespace, two names)
        assert tegula.some_flag == 1
        del tegula.some_flag
        assert triton_compile is tegula.compile
        assert tegula.language.__spec__.name == "tegula.language"
    finally:
        compat.uninstall()
        for k in [k for k in sys.modules if k == "triton" or k.startswith("triton.")]:
            del sys.modules[k]
        sys.modules.update(saved)
    assert compat._FINDER not in sys.meta_path


@pytest.mark.parametrize("name", ["triton.language.math", "triton.runtime.driver", "triton.compiler.compiler",
                                  "triton.backends.compiler", "triton.runtime.autotuner"])
def test_submodules_resolve(name):
    from tegula import compat

    spec = compat.TritonAliasFinder().find_spec(name)
    # triton.backends is Triton's plug-in registry: tegula keeps it in compat_surface
    expected = name.replace("triton.backends", "tegula.compat_surface.backends") \
        if name.startswith("triton.backends") else "tegula" + name[len("triton"):]
    assert spec is not None and spec.loader_state.__name__ == expected


def test_torch_inductor_imports_under_compat(tmp_path):
    """Importing Inductor runs its Triton probe (`triton_compat.py`: libdevice,
    `triton.language.core.view`, `triton.runtime.cache.triton_key`, ...); it must get
    through with `triton` resolving to tegula."""
    script = tmp_path / "probe.py"
    script.write_text("import torch._inductor.runtime.triton_compat as tc\n"
                      "assert tc.HAS_TRITON and tc.libdevice is not None\n"
                      "import triton.language as tl\n"
                      "assert tl.core.view is tl.view and tl.core.dtype is tl.dtype\n"
                      "print('OK')\n")
    run = _run([str(script)], cwd=tmp_path)
    assert run.returncode == 0 and "OK" in run.stdout, run.stdout + run.stderr


def test_triton_backends_and_C_are_compat_surfaces(tmp_path):
    """`triton.backends` (Triton's plug-in registry) and `triton._C` live in
    tegula.compat_surface; importing them leaves tegula's own `tegula.backends` alone."""
    script = tmp_path / "probe.py"
    script.write_text("import triton, triton.backends, triton._C.libtriton, tegula\n"
                      "assert tegula.backends.__name__ == 'tegula.backends'\n"
                      "assert triton.backends.__name__ == 'tegula.compat_surface.backends'\n"
                      "assert 'cpu' in triton.backends.backends and triton._C.libtriton.ir.context()\n"
                      "from triton import knobs\n"
                      "assert knobs.runtime.launch_enter_hook is not None\n"
                      "import os\n"
                      "assert os.environ['TEGULA_COMPAT'] == '1'  # child processes resolve triton too\n"
                      "print('OK')\n")
    run = _run([str(script)], cwd=tmp_path)
    assert run.returncode == 0 and "OK" in run.stdout, run.stdout + run.stderr
