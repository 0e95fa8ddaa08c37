"""torch.compile(backend="coil") through Dynamo (PyTorch 2.x; skipped on 1.13, which has none):
models and the seed programs against eager, on the CPU and, where there is one, the GPU."""
import unittest

import torch
import torch.nn.functional as F

import coil

try:
    import torch._dynamo
    HAS_DYNAMO = hasattr(torch, "compile")
except ImportError:
    HAS_DYNAMO = False

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@unittest.skipUnless(HAS_DYNAMO, "PyTorch without Dynamo")
class DynamoBackend(unittest.TestCase):
    def setUp(self):
        torch._dynamo.reset()
        torch.manual_seed(0)

    def assert_close(self, got, want, what, tol=1e-4):
        self.assertTrue(torch.allclose(got, want, rtol=tol, atol=tol),
                        "%s: largest difference %g" % (what, (got - want).abs().max()))

    def test_mlp_training_step(self):
        for device in DEVICES:
            with self.subTest(device):
                model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(),
                                            torch.nn.Linear(128, 10)).to(device)
                reference = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(),
                                                torch.nn.Linear(128, 10)).to(device)
                reference.load_state_dict(model.state_dict())
                compiled = torch.compile(model, backend="coil")
                x = torch.randn(32, 64, device=device)
                target = torch.randint(0, 10, (32,), device=device)
                before = coil.fallback_counts.copy()
                got = compiled(x)
                F.cross_entropy(got, target).backward()
                want = reference(x)
                F.cross_entropy(want, target).backward()
                self.assert_close(got, want, "logits")
                for (name, p), q in zip(model.named_parameters(), reference.parameters()):
                    self.assert_close(p.grad, q.grad, "the gradient of " + name)
                self.assertFalse(coil.fallback_counts - before, "ops that ran in PyTorch")

    def test_the_seed_programs(self):
        def matmul_softmax(x, y):
            return torch.softmax(torch.matmul(x, y), dim=1)

        def sin_cos(x):
            return torch.sin(x) ** 2 + torch.cos(x) ** 2

        for device in DEVICES:
            with self.subTest(device):
                x = torch.randn(100, 100, device=device)
                y = torch.randn(100, 100, device=device)
                f = torch.compile(matmul_softmax, backend="coil",
                                  options={"trace.enabled": True, "trace.graph_diagram": True})
                self.assert_close(f(x, y), matmul_softmax(x, y), "matmul + softmax")
                g = torch.compile(sin_cos, backend="coil")
                self.assert_close(g(x), sin_cos(x), "sin^2 + cos^2")

    def test_transformer_layer_inference(self):
        for device in DEVICES:
            with self.subTest(device):
                layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0,
                                                         batch_first=True).to(device).eval()
                x = torch.randn(4, 16, 64, device=device)
                with torch.no_grad():
                    want = layer(x)
                    got = torch.compile(layer, backend="coil")(x)
                self.assert_close(got, want, "a transformer encoder layer", tol=1e-3)

    @unittest.skipUnless(torch.cuda.is_available(), "no GPU")
    def test_reduce_overhead(self):
        f = torch.compile(lambda t: (t * 2 + 1).relu().sum(1), backend="coil",
                          mode="reduce-overhead")
        for call in range(4):
            x = torch.randn(64, 256, device="cuda")
            self.assert_close(f(x), (x * 2 + 1).relu().sum(1), "call %d" % call)


if __name__ == "__main__":
    unittest.main()
