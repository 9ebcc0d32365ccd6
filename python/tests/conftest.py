"""Shared test set-up: the package on sys.path, the `gpu` marker, and a fake torch.

The fake torch (the `fake_torch` fixture) is just enough of torch for the argument
checks: dtypes, duck-typed tensors (shape, stride(), dtype, get_device(), data_ptr(),
...), a device guard and a stream accessor.  Its tensors' data pointers are 0, so a
call that passes every Python check reaches the C library, which refuses the NULL
pointer before touching any device: the CPU suite thereby also checks the C error ->
Python exception mapping through every op, on hosts with or without a GPU.
"""
import contextlib
import os
import sys
import types

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)          # python/
REPO = os.path.dirname(PACKAGE_ROOT)
if PACKAGE_ROOT not in sys.path:
    sys.path.insert(0, PACKAGE_ROOT)


def pytest_configure(config):
    config.addinivalue_line('markers', 'gpu: needs torch with CUDA and a GPU (python_gpu)')


def pytest_generate_tests(metafunc):
    """A test taking `device` runs on every visible GPU (gpu_util.DEVICE_PARAMS; only GPU
    test modules, which import torch, take it)."""
    if 'device' in metafunc.fixturenames:
        from gpu_util import DEVICE_PARAMS
        metafunc.parametrize('device', DEVICE_PARAMS, indirect=True)


@pytest.fixture
def device(request):
    """torch.device('cuda:N') with cuda:0 current, as in a process that never calls
    set_device: cuda:1's cases also check that an op runs on its tensors' device while
    another one is current (torch's default stream is the NULL handle, which libckjit
    reads as the current device's)."""
    import torch
    torch.cuda.set_device(0)
    yield torch.device('cuda', request.param)
    torch.cuda.synchronize(request.param)


# ---- the fake torch ---------------------------------------------------------------------------
class FakeDtype:
    def __init__(self, name, itemsize, eps=None):
        self.name, self.itemsize, self.eps = name, itemsize, eps

    def __repr__(self):
        return f'torch.{self.name}'


class FakeDevice:
    def __init__(self, index):
        self.index = index
        self.type = 'cpu' if index < 0 else 'cuda'

    def __repr__(self):
        return 'cpu' if self.index < 0 else f'cuda:{self.index}'


def _contiguous_strides(shape):
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(strides))


class FakeTensor:
    """Shape, strides, dtype and device of a tensor, and nothing else (data_ptr() 0)."""

    def __init__(self, shape, dtype, device=0, strides=None, torch=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self._index = -1 if device == 'cpu' else device
        self.device = FakeDevice(self._index)
        self.is_cuda = self._index >= 0
        self._strides = tuple(strides) if strides is not None else _contiguous_strides(shape)
        self._torch = torch
        self.copied_from = None

    def _like(self, shape, dtype=None, strides=None):
        return FakeTensor(shape, dtype or self.dtype, self._index, strides, self._torch)

    def get_device(self):
        return self._index

    def stride(self):
        return self._strides

    def data_ptr(self):
        return 0

    def dim(self):
        return len(self.shape)

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def is_contiguous(self):
        return all(size == 1 or st == want for size, st, want in
                   zip(self.shape, self._strides, _contiguous_strides(self.shape)))

    def contiguous(self):
        return self if self.is_contiguous() else self._like(self.shape)

    def new_empty(self, shape, dtype=None):
        return self._like(tuple(shape), dtype)

    def new_ones(self, shape, dtype=None):
        return self._like((shape,) if isinstance(shape, int) else tuple(shape), dtype)

    def expand(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        lead = len(shape) - len(self.shape)
        if lead < 0:
            raise RuntimeError('expand: fewer dims')
        strides = []
        for i, size in enumerate(shape):
            own = self.shape[i - lead] if i >= lead else 1
            if own != size and own != 1:
                raise RuntimeError(f'expand: {self.shape} to {shape}')
            strides.append(self._strides[i - lead] if i >= lead and own == size else 0)
        return self._like(shape, strides=strides)

    def movedim(self, src, dst):
        order = list(range(self.dim()))
        order.insert(dst % self.dim(), order.pop(src % self.dim()))
        return self._like(tuple(self.shape[i] for i in order),
                          strides=[self._strides[i] for i in order])

    def reshape(self, *shape):
        return self._like((self.numel(),))

    def unsqueeze(self, dim):
        shape = list(self.shape)
        strides = list(self._strides)
        dim = dim % (len(shape) + 1)
        shape.insert(dim, 1)
        strides.insert(dim, 1)
        return self._like(tuple(shape), strides=strides)

    def copy_(self, other):
        self.copied_from = other
        return self

    def zero_(self):
        return self

    def fill_(self, value):
        return self


class FakeTorch(types.SimpleNamespace):
    """The attributes of torch that ckjit binds (ckjit/_torch_env.py)."""

    def __init__(self):
        dtypes = dict(float32=FakeDtype('float32', 4, 1.1920928955078125e-07),
                      float16=FakeDtype('float16', 2, 0.0009765625),
                      bfloat16=FakeDtype('bfloat16', 2, 0.0078125),
                      float64=FakeDtype('float64', 8, 2.220446049250313e-16),
                      int8=FakeDtype('int8', 1), int32=FakeDtype('int32', 4),
                      int64=FakeDtype('int64', 8), float8_e4m3fn=FakeDtype('float8_e4m3fn', 1),
                      float8_e5m2=FakeDtype('float8_e5m2', 1))
        super().__init__(**dtypes)
        self.current = 0
        self.guard_entries = []
        self._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0,
                                        _cuda_getDevice=lambda: self.current)
        self.compiler = types.SimpleNamespace(is_compiling=lambda: False)
        self.cuda = types.SimpleNamespace(device=self._guard)

    @contextlib.contextmanager
    def _guard(self, index):
        self.guard_entries.append(index)
        previous, self.current = self.current, index
        try:
            yield
        finally:
            self.current = previous

    def empty_like(self, x):
        return x._like(x.shape)

    def empty_strided(self, shape, strides, dtype=None, device=None):
        return FakeTensor(shape, dtype, device.index, strides, self)

    def device(self, kind, index):
        return FakeDevice(index)

    def finfo(self, dtype):
        return types.SimpleNamespace(eps=dtype.eps)

    def broadcast_tensors(self, a, b):
        n = max(a.dim(), b.dim())
        sa, sb = (1,) * (n - a.dim()) + a.shape, (1,) * (n - b.dim()) + b.shape
        shape = []
        for p, q in zip(sa, sb):
            if p != q and p != 1 and q != 1:
                raise RuntimeError(f'shapes {a.shape} and {b.shape} do not broadcast')
            shape.append(max(p, q))
        return a.expand(tuple(shape)), b.expand(tuple(shape))

    def tensor(self, shape, dtype=None, device=0, strides=None):
        """A fake tensor (float32 on cuda:0 by default; device 'cpu' for a host one)."""
        return FakeTensor(shape, dtype or self.float32, device, strides, self)


@pytest.fixture
def fake_torch():
    """Binds ckjit's ops to a FakeTorch for the test, then back to what they had."""
    from ckjit import _torch_env
    fake = FakeTorch()
    previous = _torch_env.activate(fake)
    try:
        yield fake
    finally:
        _torch_env.restore(previous)


def pytest_sessionfinish(session, exitstatus):
    """No test ran (every GPU test skipped for want of torch or a GPU, the rest deselected
    by `-m gpu`): exit 77, which meson reports as a skip, instead of pytest's 5."""
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = 77
