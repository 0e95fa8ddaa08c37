"""ATen FX graphs (what AOTAutograd hands a forward or backward compiler) in coil's graph text.

One table, ATEN, maps each ATen overload coil runs to a handler that writes the coil ops for it:
`handler(e, a)` gets the emitter and the call's arguments bound to the overload's schema by
name (a.self, a.dim, ...; FX nodes already coil values) and returns the coil value, or a tuple of
them for an overload with several results. A node whose overload is not in the table (or whose
handler raises Unsupported for these arguments) runs in PyTorch instead (backend.py)."""
import math
import operator

import torch

aten = torch.ops.aten

DTYPES = {
    torch.bool: ("bool", "b8"), torch.uint8: ("uint8", "u8"), torch.int8: ("int8", "i8"),
    torch.int32: ("int32", "i32"), torch.int64: ("int64", "i64"),
    torch.float16: ("float16", "f16"), torch.bfloat16: ("bfloat16", "bf16"),
    torch.float32: ("float32", "f32"), torch.float64: ("float64", "f64"),
}
_INT64_MAX = 2 ** 63 - 1
_RESERVED = {"False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
             "continue", "def", "del", "elif", "else", "except", "finally", "for", "from",
             "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass",
             "raise", "return", "try", "while", "with", "yield", "coil", "self", "inf", "nan"}


class Unsupported(Exception):
    """This call (its overload, or these arguments of it) has no coil form."""


class Value:
    """A coil value: its name in the text and, where known, its FX node's example tensor."""

    def __init__(self, name, example=None):
        self.name = name
        self.example = example


class Items:
    """The results of a coil op returning several tensors (split): picked by getitem lines."""

    def __init__(self, name):
        self.name = name


def annotation(t):
    """coil's "f32[8, 16][16, 1]cpu" for a tensor (no storage offset: a DLPack tensor's memory
    starts at its first element)."""
    if t.dtype not in DTYPES:
        raise Unsupported("dtype %s" % t.dtype)
    device = "cpu" if t.device.type == "cpu" else "cuda:%d" % (t.device.index or 0)
    return "%s[%s][%s]%s" % (DTYPES[t.dtype][1], ", ".join(map(str, t.shape)),
                             ", ".join(map(str, t.stride())), device)


class Emitter:
    """The lines of a coil graph, each value named once."""

    def __init__(self):
        self.lines = []
        self._taken = set()

    def fresh(self, base):
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "v"
        if base[0].isdigit() or base in _RESERVED:
            base = "v_" + base
        name, k = base, 0
        while name in self._taken:
            k += 1
            name = "%s_%d" % (base, k)
        self._taken.add(name)
        return name

    def render(self, a):
        if isinstance(a, (Value, Items)):
            return a.name
        if isinstance(a, (list, tuple)):
            return "[" + ", ".join(self.render(x) for x in a) + "]"
        if a is None:
            return "None"
        if isinstance(a, bool):
            return "True" if a else "False"
        if isinstance(a, int):
            return str(a)
        if isinstance(a, float):
            if math.isnan(a) or math.isinf(a):
                raise Unsupported("a literal %r" % a)
            return repr(a)
        if isinstance(a, torch.dtype):
            if a not in DTYPES:
                raise Unsupported("dtype %s" % a)
            return "coil." + DTYPES[a][0]
        if isinstance(a, torch.device):
            return '"%s"' % ("cpu" if a.type == "cpu" else "cuda:%d" % (a.index or 0))
        if isinstance(a, str):
            return '"%s"' % a
        raise Unsupported("an argument %r" % (a,))

    def call(self, op, *args, name=None, **kwargs):
        n = self.fresh(name or op)
        parts = [self.render(x) for x in args]
        parts += ["%s=%s" % (k, self.render(v)) for k, v in kwargs.items()]
        self.lines.append("    %s = coil.%s(%s)" % (n, op, ", ".join(parts)))
        return Value(n)

    def items(self, op, *args, name=None):
        v = self.call(op, *args, name=name)
        return Items(v.name)

    def getitem(self, items, k, name):
        n = self.fresh(name)
        self.lines.append("    %s = %s[%d]" % (n, items.name, k))
        return Value(n)


class Args:
    """A call's arguments by schema name, defaults filled in; `node` is the FX call."""

    def __init__(self, target, args, kwargs, node=None):
        self.node = node
        self._values = {}
        for i, arg in enumerate(target._schema.arguments):
            if i < len(args) and not arg.kwarg_only:
                self._values[arg.name] = args[i]
            elif arg.name in kwargs:
                self._values[arg.name] = kwargs[arg.name]
            else:
                self._values[arg.name] = arg.default_value

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None


def _example(v):
    if not isinstance(v, Value) or v.example is None:
        raise Unsupported("an operand without an example tensor")
    return v.example


# ---- the table -------------------------------------------------------------------------------

ATEN = {}


def _overloads(*names):
    """The overloads that exist in this PyTorch ("add.Tensor", "prims.sum"), skipping the
    others."""
    out = []
    for n in names:
        namespace = aten
        if n.startswith("prims."):
            namespace, n = torch.ops.prims, n[len("prims."):]
        packet, _, overload = n.partition(".")
        op = getattr(getattr(namespace, packet, None), overload or "default", None)
        if op is not None:
            out.append(op)
    return out


def handles(*names):
    def register(fn):
        for op in _overloads(*names):
            ATEN[op] = fn
        return fn
    return register


def _unary(coil_op):
    return lambda e, a: e.call(coil_op, a.self)


for _name, _coil in [("abs", "abs"), ("neg", "neg"), ("exp", "exp"), ("exp2", "exp2"),
                     ("expm1", "expm1"), ("log", "log"), ("log2", "log2"), ("log1p", "log1p"),
                     ("sqrt", "sqrt"), ("rsqrt", "rsqrt"), ("reciprocal", "reciprocal"),
                     ("sin", "sin"), ("cos", "cos"), ("tan", "tan"), ("tanh", "tanh"),
                     ("sigmoid", "sigmoid"), ("relu", "relu"), ("silu", "silu"), ("erf", "erf"),
                     ("floor", "floor"), ("ceil", "ceil"), ("round", "round"),
                     ("trunc", "trunc"), ("logical_not", "logical_not"), ("isnan", "isnan"),
                     ("isinf", "isinf"), ("sign", "sign"), ("sgn", "sign")]:
    handles(_name)(_unary(_coil))


@handles("alias", "detach")
def _alias(e, a):
    return a.self


@handles("gelu")
def _gelu(e, a):
    return e.call("gelu", a.self, a.approximate) if a.approximate != "none" else \
        e.call("gelu", a.self)


def _binary(coil_op):
    def handler(e, a):
        other = a.other
        alpha = getattr(a, "alpha", 1)
        if alpha != 1:
            other = e.call("mul", other, alpha)
        return e.call(coil_op, a.self, other)
    return handler


for _name, _coil in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("maximum", "maximum"),
                     ("minimum", "minimum"), ("atan2", "atan2"), ("eq", "eq"), ("ne", "ne"),
                     ("lt", "lt"), ("le", "le"), ("gt", "gt"), ("ge", "ge"),
                     ("logical_and", "logical_and"), ("logical_or", "logical_or"),
                     ("remainder", "remainder")]:
    handles(_name + ".Tensor", _name + ".Scalar", _name)(_binary(_coil))


def _logical(coil_op):
    def handler(e, a):
        if _example(a.self).dtype != torch.bool:
            raise Unsupported("bitwise operations on integers")
        return e.call(coil_op, a.self, a.other)
    return handler


handles("bitwise_and.Tensor")(_logical("logical_and"))
handles("bitwise_or.Tensor")(_logical("logical_or"))


@handles("bitwise_not")
def _bitwise_not(e, a):
    if _example(a.self).dtype != torch.bool:
        raise Unsupported("bitwise operations on integers")
    return e.call("logical_not", a.self)


@handles("div.Tensor_mode", "div.Scalar_mode")
def _div_mode(e, a):
    if a.rounding_mode is None:
        return e.call("div", a.self, a.other)
    return e.call("div", a.self, a.other, rounding_mode=a.rounding_mode)


@handles("rsub.Tensor", "rsub.Scalar")
def _rsub(e, a):
    scaled = a.self if a.alpha == 1 else e.call("mul", a.self, a.alpha)
    return e.call("sub", a.other, scaled)


@handles("masked_fill.Scalar", "masked_fill.Tensor")
def _masked_fill(e, a):
    return e.call("where", a.mask, a.value, a.self)


@handles("clamp", "clamp.Tensor")
def _clamp(e, a):
    if isinstance(a.min, Value) or isinstance(a.max, Value):
        out = a.self
        if a.min is not None:
            out = e.call("maximum", out, a.min)
        if a.max is not None:
            out = e.call("minimum", out, a.max)
        return out
    return e.call("clamp", a.self, a.min, a.max)


@handles("clamp_min")
def _clamp_min(e, a):
    return e.call("clamp", a.self, a.min, None)


@handles("clamp_max")
def _clamp_max(e, a):
    return e.call("clamp", a.self, None, a.max)


@handles("hardtanh")
def _hardtanh(e, a):
    return e.call("clamp", a.self, a.min_val, a.max_val)


# ---- reductions ------------------------------------------------------------------------------

def _dims(dim):
    if dim is None:
        return []
    return [dim] if isinstance(dim, int) else list(dim)


@handles("sum.default", "sum.dim_IntList")
def _sum(e, a):
    dim = _dims(getattr(a, "dim", None))
    keepdim = getattr(a, "keepdim", False)
    return e.call("sum", a.self, dim, keepdim, a.dtype)


@handles("mean.default", "mean.dim")
def _mean(e, a):
    x = a.self if a.dtype is None else e.call("to_dtype", a.self, a.dtype)
    return e.call("mean", x, _dims(getattr(a, "dim", None)), getattr(a, "keepdim", False))


def _reduction(coil_op):
    def handler(e, a):
        return e.call(coil_op, a.self, _dims(getattr(a, "dim", None)), getattr(a, "keepdim", False))
    return handler


for _name, _coil in [("amax", "amax"), ("amin", "amin"), ("any", "any"), ("all", "all"),
                     ("logsumexp", "logsumexp")]:
    handles(_name, _name + ".dim", _name + ".dims")(_reduction(_coil))


@handles("prod.default", "prod.dim_int")
def _prod(e, a):
    x = a.self if a.dtype is None else e.call("to_dtype", a.self, a.dtype)
    return e.call("prod", x, _dims(getattr(a, "dim", None)), getattr(a, "keepdim", False))


@handles("max.dim")
def _max_dim(e, a):
    return (e.call("amax", a.self, [a.dim], a.keepdim), e.call("argmax", a.self, a.dim, a.keepdim))


@handles("min.dim")
def _min_dim(e, a):
    return (e.call("amin", a.self, [a.dim], a.keepdim), e.call("argmin", a.self, a.dim, a.keepdim))


@handles("max.default")
def _max_all(e, a):
    return e.call("amax", a.self)


@handles("min.default")
def _min_all(e, a):
    return e.call("amin", a.self)


@handles("std.correction")
def _std(e, a):
    return e.call("std", a.self, _dims(a.dim), 1 if a.correction is None else a.correction,
                  a.keepdim)


@handles("var.correction")
def _var_correction(e, a):
    return e.call("var", a.self, _dims(a.dim), 1 if a.correction is None else a.correction,
                  a.keepdim)


@handles("native_layer_norm")
def _native_layer_norm(e, a):
    """The normalised input, and the mean and reciprocal deviation the backward reads (one
    kernel after coil's fusion, as its own layer_norm)."""
    dims = list(range(-len(a.normalized_shape), 0))
    out = e.call("layer_norm", a.input, list(a.normalized_shape), a.weight, a.bias, a.eps)
    mean = e.call("mean", a.input, dims, True)
    var = e.call("var", a.input, dims, 0, True)
    return (out, mean, e.call("rsqrt", e.call("add", var, a.eps)))


@handles("prims.sum")
def _prims_sum(e, a):
    return e.call("sum", a.inp, _dims(a.dims), False, a.output_dtype)


@handles("prims.var")
def _prims_var(e, a):
    if a.output_dtype is not None:
        raise Unsupported("prims.var with an output dtype")
    return e.call("var", a.inp, _dims(a.dims), a.correction, False)


@handles("prims.convert_element_type")
def _convert_element_type(e, a):
    return e.call("to_dtype", a.a, a.dtype)


@handles("prims.broadcast_in_dim")
def _broadcast_in_dim(e, a):
    out = a.a
    for d in range(len(a.shape)):
        if d not in a.broadcast_dimensions:
            out = e.call("unsqueeze", out, d)
    return e.call("expand", out, list(a.shape))


for _name in ("add", "sub", "mul", "div"):
    handles("prims." + _name)(lambda e, a, op=_name: e.call(op, a.self, a.other))


@handles("_softmax")
def _softmax(e, a):
    x = e.call("to_dtype", a.self, torch.float32) if a.half_to_float else a.self
    return e.call("softmax", x, a.dim)


@handles("_log_softmax")
def _log_softmax(e, a):
    x = e.call("to_dtype", a.self, torch.float32) if a.half_to_float else a.self
    return e.call("log_softmax", x, a.dim)


# ---- products, convolutions, pools -----------------------------------------------------------

@handles("addmm")
def _addmm(e, a):
    if a.beta == 1 and a.alpha == 1:
        return e.call("addmm", a.self, a.mat1, a.mat2)
    product = e.call("mm", a.mat1, a.mat2)
    return e.call("add", e.call("mul", a.self, a.beta), e.call("mul", product, a.alpha))


@handles("convolution")
def _convolution(e, a):
    if a.transposed or len(a.stride) != 2:
        raise Unsupported("a transposed or non-2-D convolution")
    return e.call("conv2d", a.input, a.weight, a.bias, list(a.stride), list(a.padding),
                  list(a.dilation), a.groups)


@handles("convolution_backward")
def _convolution_backward(e, a):
    if a.transposed or len(a.stride) != 2:
        raise Unsupported("a transposed or non-2-D convolution")
    conv = (list(a.stride), list(a.padding), list(a.dilation), a.groups)
    mask = a.output_mask
    grad_input = e.call("conv2d_input_backward", a.grad_output, a.input, a.weight, *conv) \
        if mask[0] else None
    grad_weight = e.call("conv2d_weight_backward", a.grad_output, a.input, a.weight, *conv) \
        if mask[1] else None
    grad_bias = e.call("sum", a.grad_output, [0, 2, 3]) if mask[2] else None
    return (grad_input, grad_weight, grad_bias)


def _pair(v):
    """An int[2] argument, which a schema's default may give as one int."""
    return [v, v] if isinstance(v, int) else list(v)


def _only_first_read(a, what):
    """Refuses a call of several results (a value and what its backward reads in PyTorch's
    layout) unless only the first is read."""
    if a.node is None or any(u.target is not operator.getitem or u.args[1] != 0
                             for u in a.node.users):
        raise Unsupported(what + " whose other results are read")


@handles("avg_pool2d")
def _avg_pool2d(e, a):
    if a.divisor_override is not None:
        raise Unsupported("avg_pool2d with divisor_override")
    return e.call("avg_pool2d", a.self, _pair(a.kernel_size), list(a.stride), _pair(a.padding),
                  a.ceil_mode, a.count_include_pad)


@handles("avg_pool2d_backward")
def _avg_pool2d_backward(e, a):
    if a.divisor_override is not None:
        raise Unsupported("avg_pool2d with divisor_override")
    return e.call("avg_pool2d_backward", a.grad_output, a.self, _pair(a.kernel_size),
                  list(a.stride), _pair(a.padding), a.ceil_mode, a.count_include_pad)


@handles("max_pool2d_with_indices")
def _max_pool2d(e, a):
    _only_first_read(a, "max pooling")
    return (e.call("max_pool2d", a.self, _pair(a.kernel_size), list(a.stride), _pair(a.padding),
                   _pair(a.dilation), a.ceil_mode),)


@handles("max_pool2d_with_indices_backward")
def _max_pool2d_backward(e, a):
    # coil's backward finds each window's maximum again instead of reading PyTorch's indices.
    return e.call("max_pool2d_backward", a.grad_output, a.self, _pair(a.kernel_size),
                  list(a.stride), _pair(a.padding), _pair(a.dilation), a.ceil_mode)


@handles("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
         "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention")
def _attention(e, a):
    """PyTorch's fused attention kernels: their output alone (coil's attention, its own kernel
    choice); a graph that reads their log-sum-exp or random state (a training forward, whose
    backward reads them in PyTorch's layout) keeps them in PyTorch."""
    _only_first_read(a, "attention")
    if a.dropout_p:
        raise Unsupported("attention with dropout")
    mask = getattr(a, "attn_mask", None) or getattr(a, "attn_bias", None)
    return (e.call("scaled_dot_product_attention", a.query, a.key, a.value, mask, 0.0,
                   a.is_causal, a.scale),)


# ---- layout: views, joins, copies ------------------------------------------------------------

@handles("view", "_unsafe_view", "reshape", "_reshape_alias")
def _view(e, a):
    return e.call("reshape", a.self, list(getattr(a, "size", None) or a.shape))


@handles("squeeze.dim", "squeeze.dims", "squeeze.default")
def _squeeze(e, a):
    dim = getattr(a, "dim", None)
    return e.call("squeeze", a.self, None if dim is None else _dims(dim))


@handles("slice.Tensor")
def _slice(e, a):
    end = None if a.end is None or a.end >= _INT64_MAX else a.end
    return e.call("slice", a.self, a.dim, a.start, end, a.step)


@handles("split.Tensor")
def _split(e, a):
    return e.items("split", a.self, a.split_size, a.dim)


@handles("split_with_sizes")
def _split_with_sizes(e, a):
    return e.items("split_with_sizes", a.self, list(a.split_sizes), a.dim)


@handles("slice_scatter")
def _slice_scatter(e, a):
    """`src` written over a slice of `input`: src padded to input's size, chosen by a mask
    padded the same way (two pads and a where, one fused kernel)."""
    x = _example(a.self)
    size = x.shape[a.dim]
    start = 0 if a.start is None else a.start % size if a.start < 0 else min(a.start, size)
    end = size if a.end is None or a.end >= size else a.end % size if a.end < 0 else a.end
    if a.step != 1:
        raise Unsupported("slice_scatter with a step")
    return _scatter_over(e, a.self, a.src, a.dim % x.dim(), start, end, x)


@handles("select_scatter")
def _select_scatter(e, a):
    x = _example(a.self)
    d = a.dim % x.dim()
    index = a.index % x.shape[d]
    return _scatter_over(e, a.self, e.call("unsqueeze", a.src, d), d, index, index + 1, x)


def _scatter_over(e, target, src, dim, start, end, example):
    widths = [0, 0] * (example.dim() - 1 - dim) + [start, example.shape[dim] - end]
    padded = e.call("pad", src, widths)
    ones = e.call("full", [example.shape[i] if i != dim else end - start
                           for i in range(example.dim())], True, torch.bool, example.device)
    mask = e.call("pad", ones, widths)
    return e.call("where", mask, padded, target)


@handles("fill.Scalar")
def _fill(e, a):
    x = _example(a.self)
    return e.call("full", list(x.shape), a.value, x.dtype, x.device)


@handles("constant_pad_nd")
def _constant_pad_nd(e, a):
    return e.call("pad", a.self, list(a.pad), "constant", float(a.value))


@handles("gather")
def _gather(e, a):
    if a.sparse_grad:
        raise Unsupported("gather with sparse_grad")
    return e.call("gather", a.self, a.dim, a.index)


@handles("_to_copy")
def _to_copy(e, a):
    x = _example(a.self)
    out = a.self
    if a.dtype is not None and a.dtype != x.dtype:
        out = e.call("to_dtype", out, a.dtype)
    if a.device is not None and torch.device(a.device) != x.device:
        out = e.call("to_device", out, torch.device(a.device))
    return e.call("clone", out) if out is a.self else out


# ---- factories -------------------------------------------------------------------------------

def _device_arg(device, like=None):
    if device is not None:
        return torch.device(device)
    return like.device if like is not None else torch.device("cpu")


def _dtype_arg(dtype, like=None, fill=0.0):
    if dtype is not None:
        return dtype
    if like is not None:
        return like.dtype
    return torch.int64 if isinstance(fill, int) and not isinstance(fill, bool) else \
        torch.get_default_dtype()


@handles("full")
def _full(e, a):
    return e.call("full", list(a.size), a.fill_value, _dtype_arg(a.dtype, None, a.fill_value),
                  _device_arg(a.device))


@handles("zeros")
def _zeros(e, a):
    return e.call("full", list(a.size), 0, _dtype_arg(a.dtype, None, 0.0), _device_arg(a.device))


@handles("ones")
def _ones(e, a):
    return e.call("full", list(a.size), 1, _dtype_arg(a.dtype, None, 0.0), _device_arg(a.device))


@handles("scalar_tensor")
def _scalar_tensor(e, a):
    return e.call("full", [], a.s, _dtype_arg(a.dtype, None, 0.0), _device_arg(a.device))


def _filled(fill, sized_like_self):
    """full for x.*_like(...) (x's sizes) and x.new_*(size, ...), dtype and device x's unless
    given; `fill` None takes the call's fill_value."""
    def handler(e, a):
        x = _example(a.self)
        size = list(x.shape) if sized_like_self else list(a.size)
        value = a.fill_value if fill is None else fill
        return e.call("full", size, value, _dtype_arg(a.dtype, x), _device_arg(a.device, x))
    return handler


handles("zeros_like", "empty_like")(_filled(0, True))
handles("ones_like")(_filled(1, True))
handles("full_like")(_filled(None, True))
handles("new_zeros", "new_empty")(_filled(0, False))
handles("new_ones")(_filled(1, False))
handles("new_full")(_filled(None, False))


@handles("empty.memory_format")
def _empty(e, a):
    return e.call("full", list(a.size), 0, _dtype_arg(a.dtype, None, 0.0), _device_arg(a.device))


@handles("arange.start_step", "arange.start", "arange.default")
def _arange(e, a):
    start = getattr(a, "start", 0)
    step = getattr(a, "step", 1)
    dtype = a.dtype
    if dtype is None:
        exact = all(isinstance(v, int) for v in (start, a.end, step))
        dtype = torch.int64 if exact else torch.get_default_dtype()
    return e.call("arange", start, a.end, step, dtype, _device_arg(a.device))


# The overloads whose coil op takes the same arguments in the same order: (ATen overloads, coil
# op, the schema names passed; "name[]" passes a list).
_SAME = [
    (("clone", "lift_fresh_copy"), "clone", "self"),
    (("div.Tensor", "div.Scalar"), "div", "self other"),
    (("pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar"), "pow", "self exponent"),
    (("where.self",), "where", "condition self other"),
    (("argmax",), "argmax", "self dim keepdim"),
    (("argmin",), "argmin", "self dim keepdim"),
    (("cumsum",), "cumsum", "self dim dtype"),
    (("mm",), "mm", "self mat2"),
    (("bmm",), "bmm", "self mat2"),
    (("_adaptive_avg_pool2d", "adaptive_avg_pool2d"), "adaptive_avg_pool2d", "self output_size[]"),
    (("_adaptive_avg_pool2d_backward",), "adaptive_avg_pool2d_backward", "grad_output self"),
    (("embedding",), "embedding", "weight indices padding_idx"),
    (("permute",), "permute", "self dims[]"),
    (("transpose.int",), "transpose", "self dim0 dim1"),
    (("t",), "t", "self"),
    (("expand",), "expand", "self size[]"),
    (("unsqueeze",), "unsqueeze", "self dim"),
    (("select.int",), "select", "self dim index"),
    (("narrow",), "narrow", "self dim start length"),
    (("as_strided",), "as_strided", "self size[] stride[] storage_offset"),
    (("cat",), "cat", "tensors[] dim"),
    (("stack",), "stack", "tensors[] dim"),
    (("repeat",), "repeat", "self repeats[]"),
    (("flip",), "flip", "self dims[]"),
    (("tril",), "tril", "self diagonal"),
    (("triu",), "triu", "self diagonal"),
    (("index_select",), "index_select", "self dim index"),
    (("scatter_add",), "scatter_add", "self dim index src"),
]


def _same(coil_op, names):
    def handler(e, a):
        return e.call(coil_op, *[list(getattr(a, n[:-2])) if n.endswith("[]") else getattr(a, n)
                                 for n in names.split()])
    return handler


for _names, _coil, _args in _SAME:
    handles(*_names)(_same(_coil, _args))


# The ops AOTAutograd should decompose before coil sees the graph: those coil has no form of, or
# whose decomposition into ops coil has fuses as well as a kernel of their own would.
DECOMPOSED = [
    "native_layer_norm_backward", "native_group_norm",
    "native_group_norm_backward", "native_batch_norm", "native_batch_norm_backward",
    "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "_native_batch_norm_legit_functional", "_softmax_backward_data",
    "_log_softmax_backward_data", "gelu_backward", "silu", "silu_backward", "sigmoid_backward",
    "tanh_backward", "threshold_backward", "nll_loss_forward", "nll_loss_backward", "mse_loss",
    "mse_loss_backward", "embedding_dense_backward", "addcmul", "addcdiv", "lerp", "var_mean",
    "hardtanh_backward", "leaky_relu", "leaky_relu_backward", "elu", "elu_backward", "hardswish",
    "hardswish_backward", "hardsigmoid", "hardsigmoid_backward", "softplus", "softplus_backward",
    "log_sigmoid_forward", "log_sigmoid_backward", "native_dropout_backward", "select_backward",
    "slice_backward", "unbind", "expand_as", "masked_fill", "linalg_vector_norm",
]


def decompositions():
    """The decomposition table to give AOTAutograd (decompositions=...) for coil's graphs."""
    from torch._decomp import get_decompositions
    ops = []
    for name in DECOMPOSED:
        packet = getattr(aten, name, None)
        if packet is not None:
            ops.append(packet)
    table = get_decompositions(ops)
    for op in list(table):  # what coil runs itself stays as it is
        if op in ATEN and op.overloadpacket not in (aten.silu, aten.masked_fill):
            del table[op]
    return table


def supported(node):
    """Whether coil may take `node` (an FX call), by its overload: a handler may still refuse
    particular arguments (Unsupported), checked when the graph is translated."""
    if node.op == "call_function":
        return node.target is operator.getitem or node.target in ATEN
    return False
