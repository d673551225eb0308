"""`tegula.runtime.driver` over the backends' device drivers: the CUDA driver object
keeps Triton's surface (`driver.active.get_current_device()`, `utils.
get_device_properties`, ...) and asks the CUDA backend's device driver, found through
the backend registry, for every device specific. A fake device driver stands in for
the GPU here."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from tegula.runtime import backend_registry
from tegula.runtime.driver import CpuDriver, CudaDriver, DriverConfig


class FakeDeviceDriver:
    def __init__(self) -> None:
        self.device = 1
        self.calls: list = []

    def is_usable(self) -> bool:
        return True

    def get_current_device(self) -> int:
        return self.device

    def set_current_device(self, device: int) -> None:
        self.calls.append(("set", device))
        self.device = device

    def get_current_stream(self, device=None) -> int:
        return 0x1234 + (device or 0)

    def get_device_properties(self, device: int = 0) -> dict:
        return {"multiprocessor_count": 132, "warpSize": 32, "capability": (9, 0), "max_shared_mem": 232448,
                "max_num_regs": 65536, "device": device}

    def get_device_interface(self):
        return "the device interface"

    def get_empty_cache_for_benchmark(self):
        return "cache"

    def clear_cache(self, cache) -> None:
        self.calls.append(("clear", cache))


@pytest.fixture
def fake_cuda(monkeypatch):
    dev = FakeDeviceDriver()
    backend = SimpleNamespace(name="cuda", device_driver=lambda: dev)
    monkeypatch.setitem(backend_registry._INSTANCES, "cuda", backend)
    return dev


def test_cuda_driver_delegates_to_the_backends_device_driver(fake_cuda):
    assert backend_registry.device_driver("cuda") is fake_cuda
    assert CudaDriver.is_active()
    drv = DriverConfig().for_backend("cuda")
    assert drv.get_current_device() == 1
    assert drv.get_current_stream() == 0x1234 and drv.get_current_stream(2) == 0x1236
    props = drv.utils.get_device_properties(drv.get_current_device())
    assert props["multiprocessor_count"] == 132 and props["device"] == 1
    target = drv.get_current_target()
    assert (target.backend, target.arch, target.warp_size) == ("cuda", 90, 32)
    assert drv.get_device_interface() == "the device interface"
    drv.set_current_device(0)
    drv.clear_cache(drv.get_empty_cache_for_benchmark())
    assert fake_cuda.calls == [("set", 0), ("clear", "cache")]
    assert drv.get_current_device() == 0


def test_the_default_driver_is_the_first_usable_one(fake_cuda, monkeypatch):
    config = DriverConfig()
    assert config.default.backend == "cuda" and config.active is config.default
    fake_cuda.is_usable = lambda: False
    torch = sys.modules.get("torch")
    if torch is not None:  # torch's answer comes first (as Triton's driver asks it): no GPU there either
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert DriverConfig().default.backend == "cpu"


def test_a_backend_without_a_device_driver_is_not_a_cuda_device(monkeypatch):
    monkeypatch.setitem(backend_registry._INSTANCES, "cuda", SimpleNamespace(name="cuda"))
    assert backend_registry.device_driver("cuda") is None
    assert not CudaDriver.is_active()
    with pytest.raises(RuntimeError, match="CUDA driver is not available"):
        CudaDriver()
    assert CpuDriver.is_active()


def test_the_cuda_backends_device_driver_is_its_cuda_bindings_module(monkeypatch):
    from tegula.backends.cuda import driver as cuda_driver
    monkeypatch.delitem(backend_registry._INSTANCES, "cuda", raising=False)
    assert backend_registry.device_driver("cuda") is cuda_driver
    assert CudaDriver.is_active() == cuda_driver.available()[0]
    if not cuda_driver.is_usable():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            cuda_driver.get_device_properties(0)
