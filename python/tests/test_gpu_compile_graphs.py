"""torch.compile(fullgraph=True) through ckjit's custom ops, the ops' schemas and fake
implementations (torch.library.opcheck), the dispatcher path against the eager one, and
CUDA-graph capture and replay of ckjit ops, on every visible GPU."""
import pytest

from gpu_util import MARKS, ckjit, close, rand, torch

pytestmark = MARKS + [pytest.mark.skipif(not hasattr(torch.library, 'custom_op'),
                                         reason='torch.library.custom_op needs torch >= 2.4')]


class RmsMatmulSoftmax(torch.nn.Module):
    """rms_norm -> matmul (+ bias, gelu) -> softmax, all ckjit."""

    def __init__(self, hidden, vocab, dtype, device):
        super().__init__()
        self.norm_weight = torch.nn.Parameter(rand((hidden,), dtype, device, seed=1) * 0.1 + 1,
                                              requires_grad=False)
        self.proj = torch.nn.Parameter(rand((vocab, hidden), dtype, device, 0.05, seed=2),
                                       requires_grad=False)
        self.bias = torch.nn.Parameter(rand((vocab,), dtype, device, 0.1, seed=3),
                                       requires_grad=False)

    def forward(self, x):
        h = ckjit.rms_norm(x, (x.shape[-1],), self.norm_weight, eps=1e-6)
        logits = ckjit.matmul(h, self.proj.t(), self.bias, 'gelu')
        return ckjit.softmax(logits, dim=-1)


def torch_chain(model, x):
    F = torch.nn.functional
    h = F.rms_norm(x.double(), (x.shape[-1],), model.norm_weight.double(), eps=1e-6)
    h = h.to(x.dtype).double()  # ckjit's rms_norm output is x's dtype
    logits = F.gelu(h @ model.proj.double().t() + model.bias.double())
    return torch.softmax(logits.to(x.dtype).double(), -1)


def test_compile_fullgraph_matches_eager(device):
    torch._dynamo.reset()
    model = RmsMatmulSoftmax(256, 320, torch.bfloat16, device)
    x = rand((2, 7, 256), torch.bfloat16, device, seed=4)
    with torch.no_grad():
        eager = model(x)
        compiled = torch.compile(model, fullgraph=True)
        got = compiled(x)
        got2 = compiled(rand((2, 7, 256), torch.bfloat16, device, seed=5))
    close(got, eager, torch.bfloat16, what='compiled vs eager')
    close(eager, torch_chain(model, x), rtol=3e-2, atol=1e-4, what='eager vs torch')
    close(got2, model(rand((2, 7, 256), torch.bfloat16, device, seed=5)), torch.bfloat16,
          what='second input')


def test_compiled_graph_holds_the_custom_ops(device):
    """A recording backend: the traced graph calls torch.ops.ckjit.* (no graph break, no
    ctypes call traced)."""
    torch._dynamo.reset()
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == 'call_function')
        return gm.forward

    model = RmsMatmulSoftmax(128, 64, torch.float16, device)
    x = rand((5, 128), torch.float16, device, seed=6)
    with torch.no_grad():
        got = torch.compile(model, backend=backend, fullgraph=True)(x)
    for op in ('ckjit.rms_norm', 'ckjit.matmul', 'ckjit.softmax'):
        assert any(op in s for s in seen), f'{op} not in the graph: {seen}'
    close(got, model(x), torch.float16, what='recorded graph')


def test_compile_with_out_and_residual(device):
    """out= and residual_out= under torch.compile: the functional op's result is copied in."""
    torch._dynamo.reset()
    x, r = rand((4, 64), torch.float32, device, seed=7), rand((4, 64), torch.float32, device,
                                                            seed=8)
    w = rand((64,), torch.float32, device, seed=9)

    def f(x, r, w, out):
        y, h = ckjit.layer_norm(x, (64,), w, residual=r, residual_out=r)  # r updated
        s = ckjit.sum(y, -1)
        q, scale = ckjit.rms_norm_quant(h, (64,), w)
        ckjit.softmax(y, out=out)
        return y, h, s, q, scale

    out_compiled, out_eager = torch.empty_like(x), torch.empty_like(x)
    r_compiled, r_eager = r.clone(), r.clone()
    with torch.no_grad():
        got = torch.compile(f, fullgraph=True)(x, r_compiled, w, out_compiled)
        want = f(x, r_eager, w, out_eager)
    for i, (g, e) in enumerate(zip(got + (out_compiled, r_compiled),
                                   want + (out_eager, r_eager))):
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6, msg=f'output {i}')
    torch.testing.assert_close(r_eager, (x + r), rtol=0, atol=0)


@pytest.mark.parametrize('case', ['softmax', 'rms_norm', 'layer_norm', 'matmul', 'sum',
                                  'argmax', 'relu', 'add', 'transpose', 'topk_softmax',
                                  'attention'])
def test_opcheck(device, case):
    """Schema, fake implementation and AOT tracing of each registered op
    (torch.library.opcheck) against the real implementation."""
    x = rand((6, 40), torch.bfloat16, device, seed=10)
    w = rand((40,), torch.bfloat16, device, seed=11)
    b = rand((40, 24), torch.bfloat16, device, seed=12)
    q = rand((1, 16, 2, 64), torch.bfloat16, device, seed=13)
    ops = torch.ops.ckjit
    args = {
        'softmax': (ops.softmax.default, (x, -1, 1.0, None, False)),
        'rms_norm': (ops.rms_norm.default, (x, [40], w, None, None)),
        'layer_norm': (ops.layer_norm.default, (x, [40], w, None, 1e-5, x.clone())),
        'matmul': (ops.matmul.default, (x, b, None, 'relu', None, 1.0, 0.0, None, None, None,
                                         False, 0, False)),
        'sum': (ops.sum.default, (x, 0, False, torch.float32)),
        'argmax': (ops.argmax.default, (x, -1, True, None)),
        'relu': (ops.relu.default, (x, 2.0, 1.0)),
        'add': (ops.add.default, (x, w, 1.0, 0.0)),
        'transpose': (ops.transpose.default, (x, -2, -1)),
        'topk_softmax': (ops.topk_softmax.default, (x, 4, True, torch.int32)),
        'attention': (ops.attention.default, (q, q, q, True, -1, -1, 0.0, None, None, None, None,
                                              None, None, None, 'bshd', True)),
    }[case]
    torch.library.opcheck(*args, test_utils=('test_schema', 'test_faketensor',
                                             'test_aot_dispatch_dynamic'))


def test_dispatcher_path_equals_eager(device):
    x = rand((9, 130), torch.float16, device, seed=14)
    w = rand((130,), torch.float16, device, seed=15)
    y, empty = torch.ops.ckjit.rms_norm(x, [130], w, None, None)
    assert empty.numel() == 0
    torch.testing.assert_close(y, ckjit.rms_norm(x, (130,), w), rtol=0, atol=0)
    torch.testing.assert_close(torch.ops.ckjit.softmax(x, 0, 1.0, None, False),
                               ckjit.softmax(x, dim=0), rtol=0, atol=0)
    assert torch.ops.ckjit.softmax(x, 0, 1.0, None, False).is_contiguous()


def _chain(x, w, proj):
    h = ckjit.rms_norm(x, (x.shape[-1],), w)
    return ckjit.softmax(ckjit.matmul(h, proj), dim=-1), ckjit.amax(h, -1)


def test_cuda_graph_capture_and_replay(device):
    x = rand((16, 256), torch.bfloat16, device, seed=16)
    w = rand((256,), torch.bfloat16, device, seed=17)
    proj = rand((256, 96), torch.bfloat16, device, 0.1, seed=18)
    static_x = x.clone()
    with torch.cuda.device(device):
        _chain(static_x, w, proj)  # the first call compiles or loads each kernel
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # a warm-up on a side stream, as torch recommends
            _chain(static_x, w, proj)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # a capture stream of this device (torch.cuda.graph's default one is made once, on
        # the device current at its first use)
        with torch.cuda.graph(graph, stream=torch.cuda.Stream(device)):
            static_probs, static_max = _chain(static_x, w, proj)
        for seed in (19, 20):
            fresh = rand((16, 256), torch.bfloat16, device, seed=seed)
            static_x.copy_(fresh)
            graph.replay()
            torch.cuda.synchronize()
            want_probs, want_max = _chain(fresh, w, proj)
            torch.testing.assert_close(static_probs, want_probs, rtol=0, atol=0,
                                       msg=f'probs after replay {seed}')
            torch.testing.assert_close(static_max, want_max, rtol=0, atol=0,
                                       msg=f'amax after replay {seed}')
            assert not torch.equal(static_probs, _chain(x, w, proj)[0]), 'output unchanged'


def test_cuda_graph_of_a_compiled_module(device):
    """torch.compile(mode='reduce-overhead') captures the ckjit custom ops into CUDA
    graphs (cudagraph trees)."""
    torch._dynamo.reset()
    model = RmsMatmulSoftmax(128, 200, torch.bfloat16, device)
    compiled = torch.compile(model, mode='reduce-overhead', fullgraph=True)
    with torch.no_grad(), torch.cuda.device(device):
        for seed in (21, 22, 23, 24):  # warm-up runs, then recorded replays
            x = rand((8, 128), torch.bfloat16, device, seed=seed)
            got = compiled(x).clone()
            close(got, model(x), torch.bfloat16, what=f'reduce-overhead run {seed}')
