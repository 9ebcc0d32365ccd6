"""Row ops, reductions, elementwise ops and GEMM against torch (float64 references) on
every visible GPU: odd sizes, length-1 and empty inputs, strided views, out=."""
import math

import pytest

from gpu_util import FLOATS, MARKS, TOL, ckjit, close, rand, strided_views, torch

pytestmark = MARKS
F = torch.nn.functional
ROW_SHAPES = [(1, 1), (3, 7), (37, 1000), (2, 5, 4099)]


# ---- softmax ---------------------------------------------------------------------------------
@pytest.mark.parametrize('dtype', FLOATS)
@pytest.mark.parametrize('shape', ROW_SHAPES)
def test_softmax_and_log_softmax(device, dtype, shape):
    x = rand(shape, dtype, device, 3.0)
    ref = x.double() * 0.5
    close(ckjit.softmax(x, -1, 0.5), torch.softmax(ref, -1), what='softmax')
    close(ckjit.log_softmax(x, -1, 0.5), torch.log_softmax(ref, -1), what='log_softmax')
    close(ckjit.softmax(x), torch.softmax(x.double(), -1), what='scale 1')


@pytest.mark.parametrize('dtype', FLOATS)
def test_softmax_views_dims_out_and_mask(device, dtype):
    x = rand((33, 130), dtype, device)
    for name, view in strided_views(x):
        close(ckjit.softmax(view), torch.softmax(x.double(), -1), what=name)
    close(ckjit.softmax(x, dim=0), torch.softmax(x.double(), 0), what='dim 0')
    x3 = rand((4, 6, 10), dtype, device)
    close(ckjit.log_softmax(x3, dim=1), torch.log_softmax(x3.double(), 1), what='3-d dim 1')
    out = torch.empty_like(x)
    assert ckjit.softmax(x, out=out) is out
    close(out, torch.softmax(x.double(), -1), what='out=')
    lengths = torch.randint(0, 131, (33,), dtype=torch.int32, device=device)
    y = ckjit.softmax(x, valid_cols=lengths)
    cols = torch.arange(130, device=device)[None, :]
    valid = cols < lengths[:, None].long()
    ref = torch.softmax(x.double().masked_fill(~valid, -math.inf), -1)
    ref = torch.where(valid, ref, torch.zeros_like(ref))  # rows with no valid column: 0
    close(y, ref, what='valid_cols')
    assert ckjit.softmax(torch.empty(0, 5, dtype=dtype, device=device)).shape == (0, 5)


@pytest.mark.parametrize('dtype', FLOATS)
def test_softmax_repeated_shape_prepared_path(device, dtype):
    # A shape's second call runs its prepared call: new data, an unaligned view of the
    # same shape (the prepared call's fallback), a non-contiguous input of that shape,
    # another scale (another key) and log_softmax must all still be right.
    base = rand((9, 4100), dtype, device, 2.0, seed=5)
    for i in range(3):
        x = rand((8, 4099), dtype, device, 2.0, seed=i)
        close(ckjit.softmax(x), torch.softmax(x.double(), -1), what=f'call {i}')
        close(ckjit.log_softmax(x), torch.log_softmax(x.double(), -1), what=f'log call {i}')
        close(ckjit.softmax(x, -1, 0.25), torch.softmax(x.double() * 0.25, -1), what='scale')
    shifted = base.view(-1)[1:1 + 8 * 4099].view(8, 4099)  # 1 element off: unaligned
    close(ckjit.softmax(shifted), torch.softmax(shifted.double(), -1), what='unaligned')
    wide = rand((8, 2 * 4099), dtype, device, seed=7)[:, ::2]  # same shape, strided
    close(ckjit.softmax(wide), torch.softmax(wide.double(), -1), what='non-contiguous')
    # The default stream of another current device: the full path takes over.
    other = (device.index + 1) % torch.cuda.device_count()
    x = rand((8, 4099), dtype, device, seed=11)
    with torch.cuda.device(other):
        close(ckjit.softmax(x), torch.softmax(x.double(), -1), what=f'cuda:{other} current')


# ---- norms --------------------------------------------------------------------------------------
@pytest.mark.parametrize('dtype', FLOATS)
@pytest.mark.parametrize('shape', ROW_SHAPES)
def test_layer_norm_and_rms_norm(device, dtype, shape):
    n = shape[-1]
    x = rand(shape, dtype, device, 2.0, seed=1) + 0.5
    w, b = rand((n,), dtype, device, seed=2), rand((n,), dtype, device, seed=3)
    xd = x.double()
    close(ckjit.layer_norm(x, (n,), w, b), F.layer_norm(xd, (n,), w.double(), b.double(), 1e-5),
          what='layer_norm')
    close(ckjit.layer_norm(x, (n,)), F.layer_norm(xd, (n,), eps=1e-5), what='no affine')
    eps = torch.finfo(dtype).eps
    close(ckjit.rms_norm(x, (n,), w), F.rms_norm(xd, (n,), w.double(), eps=eps), what='rms')
    close(ckjit.rms_norm(x, n, eps=1e-6), F.rms_norm(xd, (n,), eps=1e-6), what='rms eps')


@pytest.mark.parametrize('dtype', FLOATS)
def test_norms_residual_views_and_two_dims(device, dtype):
    x, r = rand((17, 300), dtype, device, seed=4), rand((17, 300), dtype, device, seed=5)
    w = rand((300,), dtype, device, seed=6)
    h = (x.float() + r.float()).to(dtype)  # what a separate add stores
    eps = torch.finfo(dtype).eps
    y, h_out = ckjit.rms_norm(x, (300,), w, residual=r)
    torch.testing.assert_close(h_out, h, rtol=0, atol=0)
    close(y, F.rms_norm(h.double(), (300,), w.double(), eps=eps), what='rms residual')
    r_in_place = r.clone()
    y2, h2 = ckjit.layer_norm(x, (300,), w, residual=r_in_place, residual_out=r_in_place)
    assert h2 is r_in_place
    torch.testing.assert_close(r_in_place, h, rtol=0, atol=0)
    close(y2, F.layer_norm(h.double(), (300,), w.double(), eps=1e-5), what='ln in place')
    for name, view in strided_views(x):
        close(ckjit.rms_norm(view, (300,), w), F.rms_norm(x.double(), (300,), w.double(),
                                                          eps=eps), what=name)
    x4 = rand((2, 3, 4, 50), dtype, device, seed=7)
    w2 = rand((4, 50), dtype, device, seed=8)
    close(ckjit.layer_norm(x4, (4, 50), w2), F.layer_norm(x4.double(), (4, 50), w2.double()),
          what='two normalized dims')


def _quant_check(q, scale, v, quant_dtype):
    qmax = 127.0 if quant_dtype == torch.int8 else 448.0
    amax = v.abs().amax(-1)
    want = torch.where(amax > 0, amax / qmax, torch.ones_like(amax))
    torch.testing.assert_close(scale.double(), want, rtol=1e-5, atol=1e-12)
    deq = q.double() * scale.double()[..., None]
    if quant_dtype == torch.int8:
        err = (deq - v).abs() / scale.double()[..., None]
        assert float(err.max()) <= 0.5 + 5e-3, 'int8: more than half a step off'
    else:
        assert bool(((deq - v).abs() <= v.abs() * 2 ** -4 + scale.double()[..., None] * 2 ** -9
                     ).all()), 'e4m3: more than half an ulp off'


@pytest.mark.parametrize('dtype', FLOATS)
@pytest.mark.parametrize('quant', ['int8', 'float8_e4m3fn'])
def test_rms_norm_quant_and_smoothquant(device, dtype, quant):
    qd = getattr(torch, quant)
    x, r = rand((9, 700), dtype, device, seed=9), rand((9, 700), dtype, device, seed=10)
    w = rand((700,), dtype, device, seed=11)
    eps = torch.finfo(dtype).eps
    q, scale = ckjit.rms_norm_quant(x, (700,), w, quant_dtype=qd)
    assert q.dtype == qd and scale.shape == (9,) and scale.dtype == torch.float32
    _quant_check(q, scale, F.rms_norm(x.double(), (700,), w.double(), eps=eps), qd)
    q, scale, h = ckjit.rms_norm_quant(x, (700,), w, residual=r, quant_dtype=qd)
    hh = (x.float() + r.float()).to(dtype)
    torch.testing.assert_close(h, hh, rtol=0, atol=0)
    _quant_check(q, scale, F.rms_norm(hh.double(), (700,), w.double(), eps=eps), qd)
    smooth = rand((700,), torch.float32, device, seed=12).abs() + 0.5
    q, scale = ckjit.smoothquant(x, smooth, quant_dtype=qd)
    _quant_check(q, scale, x.double() * smooth.double(), qd)


@pytest.mark.parametrize('dtype', FLOATS)
@pytest.mark.parametrize('experts,k', [(8, 2), (64, 8), (256, 1), (3, 3)])
def test_topk_softmax(device, dtype, experts, k):
    x = rand((37, experts), dtype, device, 2.0, seed=13)
    p = torch.softmax(x.double(), -1)
    want_w, want_i = torch.topk(p, k, -1)
    w, i = ckjit.topk_softmax(x, k)
    assert i.dtype == torch.int64
    close(w, want_w, torch.float32, rtol=1e-5, atol=1e-6, what='weights')
    # values of the chosen experts must be the top k (ties may pick other indices)
    close(p.gather(-1, i), want_w, torch.float32, rtol=1e-5, atol=1e-6, what='indices')
    w, i32 = ckjit.topk_softmax(x, k, renormalize=True, index_dtype=torch.int32)
    assert i32.dtype == torch.int32
    close(w, want_w / want_w.sum(-1, keepdim=True), torch.float32, rtol=1e-5, atol=1e-6,
          what='renormalized')


# ---- reductions -------------------------------------------------------------------------------
@pytest.mark.parametrize('dtype', FLOATS)
@pytest.mark.parametrize('layout', ['contiguous', 'permuted', 'sliced'])
def test_reductions_every_dim(device, dtype, layout):
    base = rand((5, 33, 130), dtype, device, seed=14)
    x = {'contiguous': base, 'permuted': base.permute(2, 0, 1),
         'sliced': base[:, 1:30:2, :100]}[layout]
    xd = x.double()
    for dim in list(range(x.dim())) + [-1, None]:
        kw = {} if dim is None else {'dim': dim}
        tol = {'rtol': 1e-5, 'atol': 1e-4 * (x.numel() ** 0.5)}
        close(ckjit.sum(x, dim, dtype=torch.float32), torch.sum(xd, **kw), **tol,
              what=f'sum {dim}')
        close(ckjit.mean(x, dim, keepdim=True, dtype=torch.float32),
              torch.mean(xd, **kw, keepdim=dim is not None) if dim is not None else
              xd.mean().reshape(1, 1, 1), rtol=1e-5, atol=1e-5, what=f'mean {dim}')
        close(ckjit.amax(x, dim), torch.amax(xd, **kw), what=f'amax {dim}')
        close(ckjit.amin(x, dim), torch.amin(xd, **kw), what=f'amin {dim}')
        assert torch.equal(ckjit.argmax(x, dim), torch.argmax(x, **kw)), f'argmax {dim}'
        assert torch.equal(ckjit.argmin(x, dim, dtype=torch.int32),
                           torch.argmin(x, **kw).int()), f'argmin {dim}'
    close(ckjit.sum(x, 1), torch.sum(xd, 1), dtype, rtol=TOL[dtype][0] * 4,
          atol=TOL[dtype][1] * 4 * 33 ** 0.5, what='sum in the input dtype')


def test_reductions_nan_empty_and_scalar(device):
    x = rand((4, 9), torch.float32, device, seed=15)
    x[1, 3] = float('nan')
    assert torch.isnan(ckjit.amax(x, 1)[1]) and torch.isnan(ckjit.sum(x, 1)[1])
    assert int(ckjit.argmax(x, 1)[1]) == 3
    e = torch.empty(0, 4, device=device)
    assert torch.equal(ckjit.sum(e, 0), torch.zeros(4, device=device))
    assert torch.isnan(ckjit.mean(e, 0)).all()
    with pytest.raises(IndexError):
        ckjit.amax(e, 0)
    s = torch.tensor(2.5, device=device)
    assert float(ckjit.sum(s, 0)) == 2.5 and ckjit.sum(s).shape == ()


# ---- elementwise -------------------------------------------------------------------------------
UNARY_REFS = {
    'identity': lambda x: x, 'relu': F.relu, 'silu': F.silu, 'sigmoid': torch.sigmoid,
    'gelu_tanh': lambda x: F.gelu(x, approximate='tanh'), 'gelu_erf': F.gelu,
}
BINARY_REFS = {'add': torch.add, 'sub': torch.sub, 'mul': torch.mul, 'div': torch.div,
               'maximum': torch.maximum, 'minimum': torch.minimum}


@pytest.mark.parametrize('dtype', FLOATS)
@pytest.mark.parametrize('shape', [(1,), (3, 7), (129, 1000), (2, 3, 4097)])
def test_unary_and_binary(device, dtype, shape):
    x, y = rand(shape, dtype, device, seed=16), rand(shape, dtype, device, seed=17)
    y = torch.where(y.abs() < 0.05, torch.full_like(y, 0.5), y)  # no near-zero divisors
    for name, ref in UNARY_REFS.items():
        close(getattr(ckjit, name)(x), ref(x.double()), what=name)
        close(getattr(ckjit, name)(x, scale=2.0, bias=-1.0), 2 * ref(x.double()) - 1,
              what=f'{name} epilogue')
    close(ckjit.gelu(x, approximate='tanh'), F.gelu(x.double(), approximate='tanh'), what='gelu')
    for name, ref in BINARY_REFS.items():
        close(getattr(ckjit, name)(x, y), ref(x.double(), y.double()), what=name)
    close(ckjit.mul(x, y, scale=0.5, bias=3.0), 0.5 * x.double() * y.double() + 3, what='mul epi')
    torch.testing.assert_close(ckjit.copy(x), x, rtol=0, atol=0)


@pytest.mark.parametrize('dtype', FLOATS)
def test_elementwise_views_broadcast_nan_and_out(device, dtype):
    x = rand((40, 77), dtype, device, seed=18)
    for name, view in strided_views(x):
        close(ckjit.silu(view), F.silu(x.double()), what=name)
        torch.testing.assert_close(ckjit.copy(view), x, rtol=0, atol=0)
    row = rand((77,), dtype, device, seed=19)
    close(ckjit.add(x, row), x.double() + row.double(), what='broadcast')
    a = x.clone()
    a[0, 0] = float('nan')
    assert torch.isnan(ckjit.maximum(a, x)[0, 0]) and torch.isnan(ckjit.minimum(x, a)[0, 0])
    out = torch.empty_like(x).mT.contiguous().mT  # a layout C cannot write: via a temporary
    assert ckjit.relu(x, out=out) is out
    close(out, F.relu(x.double()), what='strided out=')
    assert ckjit.relu(torch.empty(0, 3, dtype=dtype, device=device)).shape == (0, 3)


@pytest.mark.parametrize('dtype', FLOATS)
@pytest.mark.parametrize('shape', [(1, 1), (7, 300), (3, 65, 129)])
def test_transpose(device, dtype, shape):
    x = rand(shape, dtype, device, seed=20)
    want = x.transpose(-2, -1)
    for name, view in strided_views(x):
        got = ckjit.transpose(view)
        assert got.is_contiguous()
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=name)
    torch.testing.assert_close(ckjit.transpose(x, -1, -2), want, rtol=0, atol=0)


# ---- GEMM ---------------------------------------------------------------------------------------
def _gemm_close(got, ref, dtype, k, what):
    """GEMM outputs: the output dtype's rounding relative to the largest |ref|, and f32
    accumulation over k terms."""
    r, _ = TOL[dtype]
    scale = max(float(ref.abs().max()), 1.0)
    close(got, ref, rtol=r, atol=r * scale + 1e-6 * k * scale, what=what)


@pytest.mark.parametrize('dtype', FLOATS)
@pytest.mark.parametrize('mnk', [(1, 1, 1), (7, 13, 29), (64, 64, 64), (129, 200, 96),
                                 (16, 1000, 2048)])
def test_matmul_shapes_and_orders(device, dtype, mnk):
    m, n, k = mnk
    a, b = rand((m, k), dtype, device, seed=21), rand((k, n), dtype, device, seed=22)
    ref = a.double() @ b.double()
    _gemm_close(ckjit.matmul(a, b), ref, dtype, k, 'rr')
    at, bt = a.mT.contiguous().mT, b.mT.contiguous().mT  # column-major, passed as such
    _gemm_close(ckjit.matmul(at, b), ref, dtype, k, 'cr')
    _gemm_close(ckjit.matmul(a, bt), ref, dtype, k, 'rc')
    _gemm_close(ckjit.matmul(at, bt), ref, dtype, k, 'cc')
    wide = torch.zeros(m, k + 8, dtype=dtype, device=device)
    wide[:, :k] = a
    _gemm_close(ckjit.matmul(wide[:, :k], b), ref, dtype, k, 'lda > k')
    got = ckjit.matmul(a, b, out_dtype=torch.float32)
    assert got.dtype == torch.float32
    _gemm_close(got, ref, torch.float32 if dtype == torch.float32 else dtype, k, 'f32 out')


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
@pytest.mark.parametrize('activation', [None, 'relu', 'gelu', 'gelu_tanh', 'silu', 'sigmoid'])
def test_matmul_epilogue(device, dtype, activation):
    m, n, k = 70, 130, 200
    a, b = rand((m, k), dtype, device, 0.2, seed=23), rand((k, n), dtype, device, 0.2, seed=24)
    bias = rand((n,), dtype, device, seed=25)
    acts = {None: lambda v: v, 'relu': F.relu, 'gelu': F.gelu, 'silu': F.silu,
            'gelu_tanh': lambda v: F.gelu(v, approximate='tanh'), 'sigmoid': torch.sigmoid}
    ref = acts[activation](1.5 * (a.double() @ b.double()) + bias.double())
    _gemm_close(ckjit.matmul(a, b, bias, activation, alpha=1.5), ref, dtype, k, 'bias+act')
    c, d0, d1 = (rand((m, n), dtype, device, seed=s) for s in (26, 27, 28))
    row_bias = rand((m,), dtype, device, seed=29)
    ref = acts[activation](a.double() @ b.double() + 0.5 * c.double() + row_bias.double()[:, None]
                           + d0.double()) * d1.double()
    got = ckjit.matmul(a, b, row_bias, activation, beta=0.5, c=c, d0=d0, d1=d1,
                       bias_per_row=True)
    _gemm_close(got, ref, dtype, k, 'c, d0, d1, row bias')
    c_in_place = c.clone()
    got = ckjit.matmul(a, b, beta=1.0, c=c_in_place, out=c_in_place)
    assert got is c_in_place
    _gemm_close(got, a.double() @ b.double() + c.double(), dtype, k, 'in place')


@pytest.mark.parametrize('dtype', FLOATS)
def test_matmul_batched_broadcast_vectors_split_k(device, dtype):
    a = rand((3, 33, 65), dtype, device, seed=30)
    b = rand((3, 65, 17), dtype, device, seed=31)
    w = rand((65, 17), dtype, device, seed=32)
    _gemm_close(ckjit.matmul(a, b), a.double() @ b.double(), dtype, 65, 'bmm')
    _gemm_close(ckjit.matmul(a, w), a.double() @ w.double(), dtype, 65, 'folded into m')
    _gemm_close(ckjit.matmul(a.mT.contiguous().mT, w), a.double() @ w.double(), dtype, 65,
                'batched column-major a, broadcast b')
    a4 = rand((2, 1, 5, 65), dtype, device, seed=33)
    b4 = rand((4, 65, 9), dtype, device, seed=34)
    _gemm_close(ckjit.matmul(a4, b4), a4.double() @ b4.double(), dtype, 65, 'broadcast batch')
    v = rand((65,), dtype, device, seed=35)
    _gemm_close(ckjit.matmul(a[0], v), a[0].double() @ v.double(), dtype, 65, 'matrix @ vector')
    _gemm_close(ckjit.matmul(v, w), v.double() @ w.double(), dtype, 65, 'vector @ matrix')
    big_k = rand((8, 4096), dtype, device, seed=36), rand((4096, 64), dtype, device, seed=37)
    ref = big_k[0].double() @ big_k[1].double()
    for split in (1, 4, 0):
        _gemm_close(ckjit.matmul(*big_k, split_k=split), ref, dtype, 4096, f'split_k {split}')
    assert ckjit.matmul(torch.empty(0, 5, dtype=dtype, device=device),
                        torch.empty(5, 3, dtype=dtype, device=device)).shape == (0, 3)
    zero_k = ckjit.matmul(torch.empty(4, 0, dtype=dtype, device=device),
                          torch.empty(0, 3, dtype=dtype, device=device))
    assert torch.equal(zero_k, torch.zeros(4, 3, dtype=dtype, device=device))


def test_matmul_tf32(device):
    a, b = rand((256, 512), torch.float32, device, seed=38), rand((512, 128), torch.float32,
                                                                   device, seed=39)
    ref = a.double() @ b.double()
    close(ckjit.matmul(a, b, allow_tf32=True), ref, rtol=2e-2, atol=2e-2 * float(ref.abs().max()),
          what='tf32')


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16, torch.float32])
def test_grouped_matmul(device, dtype):
    shapes = [(5, 64, 40), (128, 96, 130), (1, 8, 8)]
    a = [rand((m, k), dtype, device, seed=40 + i) for i, (m, k, _) in enumerate(shapes)]
    b = [rand((k, n), dtype, device, seed=50 + i) for i, (_, k, n) in enumerate(shapes)]
    bias = [rand((n,), dtype, device, seed=60 + i) for i, (_, _, n) in enumerate(shapes)]
    got = ckjit.grouped_matmul(a, b, bias, 'relu')
    for i, (x, y, z) in enumerate(zip(a, b, bias)):
        _gemm_close(got[i], F.relu(x.double() @ y.double() + z.double()), dtype, x.shape[1],
                    f'problem {i}')
    mixed = [a[0], a[1].mT.contiguous().mT, a[2]]  # one odd order: copied row-major
    got = ckjit.grouped_matmul(mixed, b)
    for i, (x, y) in enumerate(zip(a, b)):
        _gemm_close(got[i], x.double() @ y.double(), dtype, x.shape[1], f'mixed {i}')


def test_ops_on_a_user_stream_wait_for_its_work(device):
    """The launch goes to torch's current stream: work queued before it on that stream
    (a long sleep, then the copy that fills x) must be finished when the op reads x."""
    src = rand((512, 1024), torch.float32, device, seed=70)
    x = torch.zeros_like(src)
    s = torch.cuda.Stream(device)
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        x.copy_(src)
        y = ckjit.relu(x)
        z = ckjit.matmul(x, src.mT)
    s.synchronize()
    close(y, F.relu(src.double()), what='relu on a side stream')
    close(z, src.double() @ src.double().mT, rtol=1e-4, atol=1e-3 * 1024 ** 0.5,
          what='matmul on a side stream')
