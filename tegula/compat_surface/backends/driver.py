"""`triton.backends.driver`: the base classes of device drivers.

tegula's drivers live in `tegula.runtime.driver` (`CudaDriver`, `CpuDriver`); their
base class is Triton's `DriverBase`, and `GPUDriver` names the GPU one's.
"""
from ...runtime.driver import CudaDriver, DriverBase

GPUDriver = CudaDriver

__all__ = ["DriverBase", "GPUDriver"]
