"""coil as a torch.compile backend: AOTAutograd's ATen graphs translated (aten.py), compiled by
coil through its C interface (_capi.py), and the ops coil lacks run in PyTorch between coil's
parts, as Inductor's fallback kernels."""
import collections
import operator
import os
import sys

import torch
import torch.fx
from torch.fx.passes.split_module import split_module
from torch.utils._pytree import tree_flatten, tree_unflatten

from . import _capi, aten

# ATen ops run in PyTorch because coil has no form of them, over the process: COIL_LOGS=fallbacks
# prints each graph's.
fallback_counts = collections.Counter()


def _log_enabled(name):
    names = [n.strip() for n in os.environ.get("COIL_LOGS", "").split(",")]
    return name in names or "all" in names


def _examples(gm, args):
    """Each node's example value: its FakeTensor where the graph has them (Dynamo's), else what
    running the graph on `args` gives."""
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    if all("val" in n.meta for n in calls):
        values = {n: n.meta["val"] for n in calls}
        values.update(zip([n for n in gm.graph.nodes if n.op == "placeholder"], args))
        return values
    values = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            values[n] = super().run_node(n)
            return values[n]

    with torch.no_grad():
        Recorder(gm).run(*args)
    return values


class Translation:
    """A graph whose every call is coil's, as coil's text: its inputs (indices of the call's
    arguments) and where each output comes from (coil's k-th result, an argument, a constant)."""

    def __init__(self, gm, args):
        examples = _examples(gm, args)
        e = aten.Emitter()
        env, header = {}, []
        self.inputs = []
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for i, (node, arg) in enumerate(zip(placeholders, args)):
            if isinstance(arg, torch.Tensor):
                name = e.fresh(node.name)
                header.append('%s: "%s"' % (name, aten.annotation(arg)))
                env[node] = aten.Value(name, arg)
                self.inputs.append(i)
            else:
                env[node] = arg
        self._input_names = {env[placeholders[i]].name: i for i in self.inputs}
        for node in gm.graph.nodes:
            if node.op == "call_function":
                env[node] = self._call(e, node, env, examples.get(node))
            elif node.op == "get_attr":
                raise aten.Unsupported("a get_attr node (%s)" % node.target)
            elif node.op == "output":
                self._outputs(e, node.args[0], env)
        self.text = "def forward(self, %s):\n%s\n    return (%s)\n" % (
            ", ".join(header), "\n".join(e.lines),
            "".join(name + ", " for name in self._results))

    @staticmethod
    def _call(e, node, env, example):
        if node.target is operator.getitem:
            source, k = env[node.args[0]], node.args[1]
            if isinstance(source, aten.Items):
                return aten.Value(e.getitem(source, k, node.name).name, example)
            return source[k]
        args = torch.fx.node.map_arg(node.args, lambda n: env[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
        try:
            v = aten.ATEN[node.target](e, aten.Args(node.target, args, kwargs, node))
        except aten.Unsupported as why:
            raise aten.Unsupported("%s: %s" % (node.target, why)) from None
        if isinstance(v, aten.Value) and v.example is None:
            v.example = example
        return v

    def _outputs(self, e, structure, env):
        leaves, self.spec = tree_flatten(torch.fx.node.map_arg(structure, lambda n: env[n]))
        self._results, self.sources = [], []
        for leaf in leaves:
            if isinstance(leaf, aten.Value) and leaf.name in self._input_names:
                self.sources.append(("argument", self._input_names[leaf.name]))
            elif isinstance(leaf, aten.Value):
                self.sources.append(("coil", len(self._results)))
                self._results.append(leaf.name)
            else:
                self.sources.append(("constant", leaf))
        by_name = {leaf.name: leaf for leaf in leaves if isinstance(leaf, aten.Value)}
        self.output_dtypes = [getattr(by_name[n].example, "dtype", None) for n in self._results]
        # The results as the graph returns them: a tuple or list of coil's, in order, needs no
        # unflattening (the common case, and a call's overhead).
        plain = [("coil", k) for k in range(len(self._results))]
        self.direct = None
        if self.sources == plain and self.spec.type in (tuple, list) and all(
                c.num_leaves == 1 and not c.children_specs for c in self.spec.children_specs):
            self.direct = self.spec.type

    def assemble(self, results, args):
        if self.direct is not None:
            return self.direct(results)
        leaves = [results[k] if kind == "coil" else args[k] if kind == "argument" else k
                  for kind, k in self.sources]
        return tree_unflatten(leaves, self.spec)


class CoilGraph(torch.nn.Module):
    """An ATen graph every call of which coil takes, compiled by coil for each input geometry on
    its first call with it (the graph is static in its sizes)."""

    def __init__(self, gm, mode=None, options=None):
        super().__init__()
        self.gm = gm
        self.compile_options = {"name": "aten"}
        if mode:
            self.compile_options["mode"] = mode
        if options:
            self.compile_options["options"] = dict(options)
        self._compiled = {}

    @staticmethod
    def _key(args):
        return tuple((a.dtype, a.shape, a.stride(), a.device)
                     if isinstance(a, torch.Tensor) else a for a in args)

    def _compile(self, args):
        t = Translation(self.gm, args)
        fn = _capi.Function(t.text, self.compile_options, t.output_dtypes) if t._results else None
        gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        return t, fn, gpu

    def forward(self, *args):
        key = self._key(args)
        entry = self._compiled.get(key)
        if entry is None:
            entry = self._compiled[key] = self._compile(args)
        t, fn, gpu = entry
        if gpu:  # coil's stream after PyTorch's work, PyTorch's after coil's
            torch.cuda.current_stream().synchronize()
        results = fn(*[args[i] for i in t.inputs]) if fn else []
        if gpu:
            _capi.synchronize()
        return t.assemble(results, args)


def _refused(gm, example_inputs):
    """The nodes coil does not take: calls not in the table or refused by their handler for
    these arguments (found by translating the graph once on the example inputs), the getitems of
    refused calls, and get_attr nodes."""
    examples = _examples(gm, example_inputs)
    e, env, refused = aten.Emitter(), {}, set()

    def opaque(node):  # a value coil does not compute, standing in for what PyTorch will
        ex = examples.get(node)
        return ex if isinstance(ex, (int, float, bool)) else aten.Value(e.fresh(node.name), ex)

    for node in gm.graph.nodes:
        if node.op == "call_function" and aten.supported(node) and not (
                node.target is operator.getitem and node.args[0] in refused):
            try:
                env[node] = Translation._call(e, node, env, examples.get(node))
                continue
            except aten.Unsupported:
                pass
        if node.op in ("call_function", "get_attr"):
            refused.add(node)
        env[node] = opaque(node)
    return refused


def compile_aten(gm, example_inputs, mode=None, options=None):
    """Compiles one ATen FX graph (AOTAutograd's forward or backward; it is both fw_compiler and
    bw_compiler): a coil graph, or, where some calls are not coil's, the graph split around them,
    those calls run in PyTorch and coil's parts compiled."""
    for node in list(gm.graph.nodes):  # results nobody reads: not reasons to refuse a call
        if node.target is operator.getitem and not node.users:
            gm.graph.erase_node(node)
    gm.recompile()
    refused = _refused(gm, example_inputs)
    if not refused:
        return CoilGraph(gm, mode, options)
    names = collections.Counter(str(n.target) for n in refused
                                if n.op == "call_function" and n.target is not operator.getitem)
    fallback_counts.update(names)
    if _log_enabled("fallbacks"):
        print("coil: fallbacks: %s run in PyTorch" % ", ".join(
            "%s x%d" % kv for kv in sorted(names.items())), file=sys.stderr)
    part, current, last_refused = {}, 0, None
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        is_refused = node in refused
        if is_refused or last_refused:
            current += 1
        part[node] = current
        last_refused = is_refused
    coil_parts = {"submod_%d" % p for n, p in part.items() if n not in refused}
    split = split_module(gm, gm, lambda n: part[n])
    for name, sub in list(split.named_children()):
        if name in coil_parts and any(n.op == "call_function" for n in sub.graph.nodes):
            setattr(split, name, CoilGraph(sub, mode, options))
    return split


def compile_fx(gm, example_inputs, mode=None, options=None):
    """The Dynamo backend: `gm` through AOTAutograd (with aten.decompositions()), each ATen
    graph compiled by compile_aten."""
    def compiler(g, inputs):
        return compile_aten(g, inputs, mode, options)

    try:
        from torch._dynamo.backends.common import aot_autograd
    except ImportError:  # PyTorch before 2.0: functorch's AOTAutograd
        from functorch.compile import aot_module_simplified
        return aot_module_simplified(gm, compiler, compiler,
                                     decompositions=aten.decompositions())
    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler,
                        decompositions=aten.decompositions())(gm, example_inputs)
