"""The Python backend against PyTorch eager: ATen graphs from AOTAutograd (functorch's
aot_function, what Dynamo's aot_autograd hands a backend) translated to coil's graphs, compiled
and run; values and gradients compared with eager's, fallbacks around ops coil lacks, and the
errors of bad input. Runs with PyTorch 1.13's functorch (CI) and 2.x (the device)."""
import unittest

import torch
import torch.nn.functional as F
from functorch.compile import aot_function, aot_module

import coil

torch.manual_seed(0)


def compiled(fn):
    return aot_function(fn, coil.compile_aten, coil.compile_aten,
                        decompositions=coil.decompositions())


def leaves(x):
    return x if isinstance(x, (tuple, list)) else (x,)


class Checks(unittest.TestCase):
    def assert_close(self, got, want, what, rtol=1e-4, atol=1e-5):
        for k, (g, w) in enumerate(zip(leaves(got), leaves(want))):
            self.assertEqual(g.dtype, w.dtype, "%s, result %d: dtype" % (what, k))
            self.assertEqual(g.shape, w.shape, "%s, result %d: shape" % (what, k))
            self.assertTrue(torch.allclose(g.double(), w.double(), rtol=rtol, atol=atol,
                                           equal_nan=True),
                            "%s, result %d: %s\nagainst %s" % (what, k, g, w))

    def check(self, fn, *inputs, grads=True, what=None, fallbacks=()):
        """fn compiled against eager on the same inputs: its results and, for floating inputs
        that require grad, the gradients of the sum of its floating results; no op but those
        named in `fallbacks` may run in PyTorch."""
        what = what or fn.__name__
        before = coil.fallback_counts.copy()
        self._check(fn, inputs, grads, what)
        ran = {op for op in coil.fallback_counts - before}
        unexpected = {op for op in ran if not any(f in op for f in fallbacks)}
        self.assertFalse(unexpected, "%s: ops that ran in PyTorch" % what)
        return ran

    def _check(self, fn, inputs, grads, what):
        eager_in = [t.clone().requires_grad_(grads and t.is_floating_point()) for t in inputs]
        coil_in = [t.clone().requires_grad_(grads and t.is_floating_point()) for t in inputs]
        want = fn(*eager_in)
        got = compiled(fn)(*coil_in)
        self.assert_close([g.detach() for g in leaves(got)], [w.detach() for w in leaves(want)],
                          what)
        if not grads:
            return
        floats = [(g, w) for g, w in zip(leaves(got), leaves(want))
                  if w.is_floating_point() and w.requires_grad]
        if not floats:
            return
        sum(w.sum() for _, w in floats).backward()
        sum(g.sum() for g, _ in floats).backward()
        for k, (g, w) in enumerate(zip(coil_in, eager_in)):
            if w.grad is not None:
                self.assert_close(g.grad, w.grad, "%s, gradient of input %d" % (what, k))


class OpsMatchEager(Checks):
    """Every handler of the table, forward and backward."""

    def test_pointwise(self):
        x, y = torch.randn(6, 8), torch.randn(6, 8)
        pos = torch.rand(6, 8) + 0.5
        for name, fn in [
            ("arith", lambda a, b: (a + b * 2 - 3) * a / (b.abs() + 1)),
            ("alpha", lambda a, b: torch.add(a, b, alpha=0.5) - torch.sub(b, a, alpha=2)),
            ("rsub", lambda a, b: 1 - a),
            ("unary", lambda a, b: a.sin() + a.cos() + a.tanh() + a.sigmoid() + a.exp() +
             torch.erf(a) + a.neg() + F.silu(a) + a.relu() + a.abs()),
            ("gelu", lambda a, b: F.gelu(a) + F.gelu(b, approximate="tanh")),
            ("pow", lambda a, b: a ** 2 + a.abs() ** 0.5 + torch.pow(2.0, b)),
            ("minmax", lambda a, b: torch.maximum(a, b) + torch.minimum(a, b) +
             a.clamp(-0.5, 0.5) + a.clamp(min=0.1) + F.hardtanh(b)),
            ("where", lambda a, b: torch.where(a > b, a, b * 2) + a.masked_fill(b < 0, 0.5)),
        ]:
            with self.subTest(name):
                self.check(fn, x, y, what=name)
        self.check(lambda p: p.log() + p.sqrt() + p.rsqrt() + p.reciprocal() + p.log1p(), pos,
                   what="positive")

    def test_comparisons_and_bools(self):
        x, y = torch.randn(5, 7), torch.randn(5, 7)
        self.check(lambda a, b: (a > b, a <= 0, a == a, (a > 0) & (b > 0), ~(a > b)), x, y,
                   grads=False, what="comparisons")

    def test_reductions(self):
        x = torch.randn(4, 6, 8)
        for name, fn in [
            ("sum", lambda a: (a.sum(), a.sum(1), a.sum((0, 2), keepdim=True))),
            ("mean", lambda a: (a.mean(), a.mean(-1))),
            ("amax", lambda a: (a.amax(1), a.amin((0, 2)), a.max(1)[0], a.logsumexp(2))),
            ("var", lambda a: (a.var(1), a.std(2, unbiased=False))),
            ("softmax", lambda a: (F.softmax(a, -1), F.log_softmax(a, 1))),
            ("cumsum", lambda a: a.cumsum(1)),
        ]:
            with self.subTest(name):
                # max's backward scatters its gradient by index: PyTorch's.
                self.check(fn, x, what=name, fallbacks=("scatter",) if name == "amax" else ())
        self.check(lambda a: (a.argmax(1), a.max(2)[1]), x, grads=False, what="argmax")

    def test_products(self):
        a, b, bias = torch.randn(8, 16), torch.randn(16, 12), torch.randn(12)
        self.check(lambda x, w, c: (x @ w, F.linear(x, w.t(), c), torch.addmm(c, x, w)),
                   a, b, bias, what="mm")
        self.check(lambda x, w, c: torch.addmm(c, x, w, beta=0.5, alpha=2), a, b, bias,
                   what="addmm scaled")
        self.check(lambda x, y: torch.bmm(x, y), torch.randn(3, 4, 5), torch.randn(3, 5, 6),
                   what="bmm")

    def test_layouts(self):
        x = torch.randn(4, 6, 8)
        for name, fn in [
            ("views", lambda a: (a.view(24, 8), a.reshape(4, -1), a.permute(2, 0, 1),
                                 a.transpose(0, 1), a[1], a[:, 2:5], a.unsqueeze(1),
                                 a[:1].squeeze(0), a.narrow(2, 1, 3), a.expand(2, 4, 6, 8))),
            ("joins", lambda a: (torch.cat([a, a * 2], 1), torch.stack([a, a], 0),
                                 a.split(2, 2)[1], a.flip(0), a.repeat(1, 2, 1),
                                 F.pad(a, (1, 2)))),
            ("tri", lambda a: (a[0].tril(), a[0].triu(1))),
            ("copies", lambda a: (a.t() if a.dim() == 2 else a.clone(), a.double(),
                                  a.contiguous())),
        ]:
            with self.subTest(name):
                self.check(fn, x, what=name)

    def test_indexing_and_factories(self):
        w = torch.randn(10, 4)
        idx = torch.tensor([[1, 3], [9, 0]])
        # Their backwards write by index (index_put, index_add, scatter): PyTorch's.
        self.check(lambda t, i: F.embedding(i, t), w, idx, what="embedding",
                   fallbacks=("index_put",))
        self.check(lambda t, i: t.index_select(0, i.flatten()) + t.gather(1, i % 4).sum(),
                   w, idx, what="index_select/gather", fallbacks=("index_add", "scatter"))
        self.check(lambda t: (t + torch.zeros_like(t) + torch.ones(10, 4),
                              torch.arange(10) * 2, t.new_zeros(3), torch.full((2,), 7.0)),
                   w, what="factories")

    def test_convolutions(self):
        x, w, b = torch.randn(2, 3, 9, 9), torch.randn(4, 3, 3, 3), torch.randn(4)
        self.check(lambda a, k, c: F.conv2d(a, k, c, stride=2, padding=1), x, w, b,
                   what="conv2d")
        self.check(lambda a: (F.avg_pool2d(a, 2), F.adaptive_avg_pool2d(a, 1)), x,
                   what="pools")
        # Max pooling's forward keeps PyTorch's kernel where its indices are saved for the
        # backward (training); the backward is coil's. In inference the forward is coil's too.
        self.check(lambda a: F.max_pool2d(a, 3, 2, 1), x, what="max pool",
                   fallbacks=("max_pool2d_with_indices",))
        with torch.no_grad():
            self.check(lambda a: F.max_pool2d(a, 2), x, grads=False, what="max pool, inference")


class ModelsMatchEager(Checks):
    def test_mlp_training_step(self):
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 5))
        reference = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                        torch.nn.Linear(32, 5))
        reference.load_state_dict(model.state_dict())
        step = aot_module(model, coil.compile_aten, coil.compile_aten,
                          decompositions=coil.decompositions())
        x, target = torch.randn(8, 16), torch.randint(0, 5, (8,))
        before = coil.fallback_counts.copy()
        F.cross_entropy(step(x), target).backward()
        self.assertFalse(coil.fallback_counts - before, "ops that ran in PyTorch")
        F.cross_entropy(reference(x), target).backward()
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            self.assert_close(p.grad, q.grad, "the gradient of " + name)

    def test_transformer_block(self):
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        layer.eval()
        x = torch.randn(2, 10, 32)
        want = layer(x)
        before = coil.fallback_counts.copy()
        got = aot_module(layer, coil.compile_aten, coil.compile_aten,
                         decompositions=coil.decompositions())(x)
        self.assert_close(got, want, "a transformer encoder layer", rtol=1e-3, atol=1e-4)
        self.assertFalse(coil.fallback_counts - before, "ops that ran in PyTorch")


class Fallbacks(Checks):
    def test_ops_coil_lacks_run_in_pytorch(self):
        ran = self.check(
            lambda a: (torch.erfinv(a.tanh() * 0.5) * 2).sum(1) + a.cumprod(1)[:, -1],
            torch.randn(4, 5), what="erfinv and cumprod between coil's parts",
            fallbacks=("erfinv", "cumprod"))
        self.assertTrue(any("erfinv" in op for op in ran), ran)

    def test_arguments_the_table_refuses(self):
        # A transposed convolution is in ATen's convolution overload, which coil takes only
        # untransposed: that node runs in PyTorch.
        x, w = torch.randn(1, 2, 5, 5), torch.randn(2, 3, 3, 3)
        self.check(lambda a, k: F.conv_transpose2d(a, k).relu(), x, w, what="transposed conv",
                   fallbacks=("convolution",))


class Package(unittest.TestCase):
    def test_the_dynamo_entry_point_names_the_backend(self):
        from importlib.metadata import entry_points
        found = [e for e in entry_points(group="torch_dynamo_backends") if e.name == "coil"]
        self.assertEqual(len(found), 1, "the torch_dynamo_backends entry point")
        self.assertIs(found[0].load(), coil.compile_fx)


class BadInput(unittest.TestCase):
    def test_malformed_text_is_a_clear_error(self):
        with self.assertRaisesRegex(coil.CoilError, "line 1"):
            coil.Function("this is not a graph")
        with self.assertRaisesRegex(coil.CoilError, "unknown op 'coil.no_such_op'"):
            coil.Function('def forward(self, x: "f32[2][1]cpu"):\n'
                          '    y = coil.no_such_op(x)\n    return (y,)\n')

    def test_bad_options_and_inputs(self):
        text = 'def forward(self, x: "f32[2][1]cpu"):\n    y = coil.sin(x)\n    return (y,)\n'
        with self.assertRaisesRegex(coil.CoilError, "unknown field 'colour'"):
            coil.Function(text, {"colour": "blue"})
        f = coil.Function(text)
        self.assertTrue(torch.allclose(f(torch.ones(2))[0], torch.ones(2).sin()))
        with self.assertRaisesRegex(coil.CoilError, "takes 1 inputs, not 2"):
            f(torch.ones(2), torch.ones(2))
        with self.assertRaisesRegex(coil.CoilError, "f32"):
            f(torch.ones(3))


if __name__ == "__main__":
    unittest.main()
