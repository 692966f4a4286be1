"""Fusion: what ends up in one kernel, and that every decision is an event with its reason."""

import logging

import pytest
import torch

from tracetorch import logs
from cpp_test_utils import check, compile_fn, extern_count, kernel_count

pytestmark = pytest.mark.usefixtures("backend_cache_dir")


def test_sin_cos_is_one_kernel():
    rt = check(lambda x: x.sin().cos(), [torch.randn(33, 17)])
    assert kernel_count(rt) == 1


def test_softmax_is_one_kernel():
    rt = check(lambda x: torch.softmax(x, -1), [torch.randn(8, 40)])
    assert kernel_count(rt) == 1


def test_log_softmax_is_one_kernel():
    rt = check(lambda x: torch.log_softmax(x, -1), [torch.randn(8, 40)])
    assert kernel_count(rt) == 1


def test_layernorm_is_one_kernel():
    w, b = torch.randn(32), torch.randn(32)
    rt = check(lambda x, w, b: torch.nn.functional.layer_norm(x, (32,), w, b), [torch.randn(6, 32), w, b])
    assert kernel_count(rt) == 1


def test_layernorm_of_a_stored_residual_sum_is_one_kernel():
    """A pre-norm transformer's residual stream: h = x + attention output is stored (the next
    residual add reads it) and normalized. The variance's shift (the row's first element) used to
    be loaded from h at [row, 0], another point than the one h is stored at, which kept the
    normalization out of h's kernel: two kernels, h read back (ViT, GPT-2: once per layer)."""
    def f(x, y, z, w, b):
        ln = torch.nn.functional.layer_norm
        h = x + y                       # recomputed where read: its kernels store nothing of it
        h2 = h + z                      # stored: a graph output here, the next residual in a model
        return ln(h, (32,), w, b), h2, ln(h2, (32,), w, b)
    rt = check(f, [torch.randn(6, 32), torch.randn(6, 32), torch.randn(6, 32), torch.randn(32), torch.randn(32)])
    assert kernel_count(rt) == 1      # both norms and h2's store: one pass over the rows (was 2)


def test_rmsnorm_is_one_kernel():
    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    rt = check(rms, [torch.randn(6, 32), torch.randn(32)])
    assert kernel_count(rt) == 1


def test_matmul_bias_gelu_epilogue_is_one_kernel():
    def f(x, w, b):
        return torch.nn.functional.gelu(x @ w + b)
    rt = check(f, [torch.randn(8, 16), torch.randn(16, 24), torch.randn(24)])
    assert extern_count(rt) == 1          # the matmul: an ATen call
    assert kernel_count(rt) == 1          # bias + gelu: one generated kernel
    code = rt.compiled.code
    assert "torch.mm(" in code or "torch.addmm(" in code   # through the Python binding (RUNTIME_NAMES)


def test_horizontal_fusion_of_independent_reductions():
    rt = check(lambda x: (x.sum(-1), x.amax(-1), (x * x).sum(-1)), [torch.randn(5, 12)])
    assert kernel_count(rt) == 1


def test_fusion_decisions_are_events():
    with logs.testing.capture(artifacts=["fusion_decision"]) as events:
        # softmax fuses; the column sum iterates (7 outer x 6 reduction) and is refused
        check(lambda x: (torch.softmax(x, -1), x.sum(0)), [torch.randn(6, 7)])
    decisions = [e for e in events if e.name == "fusion_decision"]
    assert decisions
    payloads = [d.payload() if callable(d.payload) else d.payload for d in decisions]
    assert any(p["fused"] for p in payloads)
    assert any(not p["fused"] for p in payloads)
    assert all(p["reason"] for p in payloads)


def test_no_fusion_across_mismatched_reduction_order():
    # sum over dim 0 has a different (outer, reduction) split than the pointwise over (i, j)
    rt = check(lambda x: (x.sum(0), x.sin()), [torch.randn(9, 5)])
    assert kernel_count(rt) >= 1


def test_dead_code_is_eliminated():
    def f(x):
        unused = x.sin() * 3     # noqa: F841  (never reaches an output)
        return x.cos()
    rt = check(f, [torch.randn(4, 4)])
    assert "std::sin" not in rt.compiled.code
    assert kernel_count(rt) == 1


def test_dead_buffers_are_reused():
    # three softmaxes in a row: the second's input dies in its kernel, its storage is reused
    def f(x, w):
        a = torch.softmax(x @ w, -1)
        b = torch.softmax(a @ w, -1)
        return torch.softmax(b @ w, -1)
    rt = check(f, [torch.randn(8, 8), torch.randn(8, 8)])
    code = rt.compiled.code
    assert "# reuse" in code or "# in-place" in code


def test_planned_peak_counts_inputs_outputs_and_reuse():
    """The `scheduled` event's planned_peak_bytes: x and w (16 KB each) alive, sin(x) added (x
    then dropped), the product added while sin(x) and w are still read (48 KB, the peak), the
    cosine stored in place of the dying product (no new bytes)."""
    from tracetorch.compiler import config
    with logs.testing.capture(names={"scheduled"}, level=logging.INFO) as events, \
            config.patch(**{"backend.cache_enabled": False}):
        rt = check(lambda x, w: (x.sin() @ w).cos(), [torch.randn(64, 64), torch.randn(64, 64)])
    assert "# in-place" in rt.compiled.code
    assert [e.fields["planned_peak_bytes"] for e in events] == [3 * 64 * 64 * 4]


def test_inplace_reuse_of_a_dying_input():
    def f(x, w):
        y = x @ w                      # extern output, dies in the next kernel
        return (y.sin() + 1) @ w
    rt = check(f, [torch.randn(8, 8), torch.randn(8, 8)])
    assert "# in-place" in rt.compiled.code


def test_inplace_reuse_of_a_dying_input_of_another_shape():
    """A linear layer's [tokens, width] product read by an elementwise op that writes [batch,
    seq, width]: as many elements, each read where it is written. The op stores into the
    product's storage, seen in its own sizes (it was a new allocation: one activation more
    alive during the kernel, e.g. a GELU backward joined with its recompute)."""
    def f(x, w, b):
        y = (x.view(-1, 8) @ w).view(2, 3, 8)      # extern output, dies in the next kernel
        z = y.sin() * b
        return z @ w
    rt = check(f, [torch.randn(2, 3, 8), torch.randn(8, 8), torch.randn(2, 3, 8)])
    code = rt.compiled.code
    line = next(ln for ln in code.splitlines() if "# in-place" in ln)
    assert ".as_strided((2, 3, 8), (24, 8, 1))" in line, line


def test_pointwise_over_a_view_fuses_into_the_reduction_it_reads():
    # the normalisation is computed over the [256, 128] view while its statistics reduce
    # [4, 64] x [128]: the pointwise loops are re-split as [4, 64, 128] to join the reduction
    def f(x, w):
        m = x.mean(-1, keepdim=True)
        z = (x - m).view(256, 128) * w
        return z, m
    rt = check(f, [torch.randn(4, 64, 128), torch.randn(128)])
    assert kernel_count(rt) == 1


def test_reduction_fuses_into_pointwise_producer_over_coarser_loops():
    # the producer is computed over [256, 128] and its sum over [4, 64] x [128] after a view
    def f(x):
        y = (x * 2).sin()
        return y, y.view(4, 64, 128).sum(-1)
    rt = check(f, [torch.randn(256, 128)])
    assert kernel_count(rt) == 1


def test_sibling_fusion_is_not_hoisted_past_an_extern_kernel():
    """cos(x) shares its read of x with sin(x), but computing it there would keep its result
    alive across the matmul (in a backward graph: a recomputed activation held across a
    convolution's backward, one activation more at the peak). It runs after the matmul."""
    with logs.testing.capture(artifacts=["fusion_decision"]) as events:
        rt = check(lambda x, w: ((x.sin() @ w) * x.cos()) @ w, [torch.randn(8, 8), torch.randn(8, 8)])
    code = rt.compiled.code
    call = code[code.index("def call"):]
    assert call.index("torch.mm(") < call.index("cos")
    payloads = [e.payload() if callable(e.payload) else e.payload
                for e in events if e.name == "fusion_decision"]
    refused = [p for p in payloads if not p["fused"] and p["kind"] == "horizontal"]
    assert any("kept alive across" in p["reason"] for p in refused), payloads


def _mlp_backward_like(h, g, w2):
    gi = g @ w2                                          # the gradient arriving at the GELU output
    s = h * 0.5 * (1 + torch.erf(h * 0.7071067811865476))     # the GELU, recomputed
    wg = g.t() @ s                                       # the second layer's weight gradient
    gb = gi * (0.5 * (1 + torch.erf(h * 0.7071067811865476)) + h * torch.exp(-0.5 * h * h) * 0.3989)
    return wg, gb


def test_a_sibling_that_frees_what_it_allocates_is_hoisted_past_an_extern_kernel():
    """The GELU backward shares its read of the layer's widest activation with the GELU
    recomputed for the weight gradient's product. Computing it there, before that product, keeps
    its result alive across the product, but it is the last reader of the incoming gradient (a
    buffer as large): nothing more is alive at the product, and one kernel reads the activation
    once (ViT-S's backward: two kernels per layer, inductor's one)."""
    inputs = [torch.randn(24, 32), torch.randn(24, 16), torch.randn(16, 32)]
    from tracetorch.compiler import config
    with config.patch(**{"backend.cache_enabled": False}):
        rt = check(_mlp_backward_like, inputs)
    code = rt.compiled.code
    call = code[code.index("def call"):]
    erf_kernels = [line for line in call.splitlines() if line.strip().startswith("# kernel") and "erf" in line]
    assert len(erf_kernels) == 1, call
    assert extern_count(rt) == 2


def _two_sums_around_a_product(g, a, b, w):
    s1 = (g * a).sum(1)
    y = a @ w
    s2 = (g * b).sum(1, keepdim=True)     # shares its read of g with s1, after the product
    return s1, y, s2, (g * s2) @ w        # g * s2: a full-size consumer of s2, over s2's rows


def test_a_reduction_with_a_small_output_is_hoisted_but_not_its_large_consumers():
    """A residual block's backward reduces one gradient for two batch norms, with a convolution's
    backward between them: the second reduction joins the first's kernel (its output is 128 times
    smaller than what it reads, so holding it across the product costs nothing) and the gradient
    is read once. A full-size consumer of that reduction would then be computed before the
    product too and kept alive across it: it stays after the product."""
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(*s, generator=g) * 0.1 for s in [(8, 128), (8, 128), (8, 128), (128, 8)]]
    from tracetorch.compiler import config
    with config.patch(**{"backend.cache_enabled": False}):
        rt = check(_two_sums_around_a_product, inputs)
    code = rt.compiled.code
    call = code[code.index("def call"):]
    lines = [ln.strip() for ln in call.splitlines()]
    sums = [ln for ln in lines if ln.startswith("# kernel") and "sum" in ln]
    assert len(sums) == 1 and "sum_1" in sums[0] and "sum_2" in sums[0], call
    product = next(i for i, ln in enumerate(lines) if "torch.mm(" in ln)
    consumer = next(i for i, ln in enumerate(lines) if ln.startswith("# kernel") and "mul_2" in ln)
    assert lines.index(sums[0]) < product < consumer, call


def _norm_then_product(x, y, w):
    h = x + y                                  # a residual sum: the backward needs it saved
    out = torch.nn.functional.layer_norm(h, (32,)) @ w
    return out, h


def test_a_graph_output_is_stored_by_the_kernel_that_computes_it_first():
    """A training forward's saved residual sums were recomputed and stored by a kernel of their
    own after the last matmul (each is read where the norm needs it, and fusing its store there
    would hoist it past the matmuls): GPT-2's forward had 50 such kernels. A graph output is alive
    at the graph's end anyway, so its store joins the norm's kernel."""
    inputs = [torch.randn(6, 32), torch.randn(6, 32), torch.randn(32, 8)]
    from tracetorch.compiler import config
    with config.patch(**{"backend.cache_enabled": False}):
        rt = check(_norm_then_product, inputs)
    assert kernel_count(rt) == 1, rt.compiled.code
    assert extern_count(rt) == 1


def test_a_value_read_by_several_extern_calls_is_stored_once(backend_cache_dir):
    """One attention mask read by every layer's attention (an extern call each) is computed by
    one kernel into one buffer: each extern argument used to be realized on its own (GPT-2 on
    the H200: 12 mask kernels per call where inductor has one)."""
    import logging

    from tracetorch import compiler, logs
    from tracetorch.compiler import config

    def layers(q, m):
        mask = (m > 0) & (m < 3)
        x = q
        for _ in range(4):
            x = torch.nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=mask).sin()
        return x
    q, m = torch.randn(2, 3, 8, 4), torch.randn(2, 1, 8, 8)
    torch._dynamo.reset()
    with config.patch(**{"backend.fallback_on_error": False, "backend.cache_enabled": False}), \
            logs.testing.capture(names={"kernel"}, level=logging.DEBUG) as kernels:
        out = torch.compile(layers, backend=compiler.backend)(q, m)
    torch.testing.assert_close(out, layers(q, m), atol=1e-5, rtol=1e-5)
    names = [(e.payload or {}).get("name", "") for e in kernels]
    assert sum("bitwise_and" in n for n in names) == 1, names


def test_a_value_an_extern_call_stores_is_read_back_by_its_other_readers():
    """GELU's gradient in an MLP backward feeds `g @ w`, `g.t() @ x` and `g.sum(0)`. Once the
    first product stores it, the transposed product reads a transposed view of that buffer and
    the sum reduces the buffer: the erf is computed by one kernel, not three (one of them a
    transposed copy, 3.5x slower than inductor's on ViT-S's backward on the H100)."""
    def backward_like(h, grad, w, x):
        g = grad * (0.5 * (1 + torch.erf(h * 0.7071067811865476)) + h * torch.exp(-0.5 * h * h) * 0.3989)
        return g @ w, g.t() @ x, g.sum(0)
    inputs = [torch.randn(24, 32), torch.randn(24, 32), torch.randn(32, 16), torch.randn(24, 8)]
    from tracetorch.compiler import config
    with logs.testing.capture(names={"value_stored"}, level=logging.DEBUG, artifacts=None) as events, \
            config.patch(**{"backend.cache_enabled": False}):     # lowered here, not a cache hit
        rt = check(backward_like, inputs)
    assert any("readers load the buffer" in e.fields["reason"] for e in events), [e.fields for e in events]
    code = rt.compiled.code
    call = code[code.index("def call"):]
    erf_kernels = [line for line in call.splitlines() if line.strip().startswith("# kernel") and "erf" in line]
    assert len(erf_kernels) == 1, call
    assert extern_count(rt) == 2


def _counters_between_products(x, w1, w2, c1, c2, c3):
    c1.add_(1)
    y = (x @ w1).relu()
    c2.add_(1)
    z = (y @ w2).sigmoid()
    c3.add_(1)
    return z


def test_tiny_independent_updates_share_one_kernel_across_extern_calls():
    """A training forward bumps every batch norm's num_batches_tracked (a 0-d add), one between
    each pair of convolutions: each was a kernel launch of its own. Pointwise nodes of a few
    elements over the same loops join one kernel even without backend.fuse_independent, and
    even past an extern call (holding a few elements alive costs nothing). The counters and the
    result match eager's."""
    from cpp_test_utils import check_with_mutations, compile_fn

    def make(seed):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(4, 8, generator=g), torch.randn(8, 8, generator=g), torch.randn(8, 3, generator=g),
                torch.tensor(5), torch.tensor(0), torch.tensor(2.5)]

    rt = compile_fn(_counters_between_products, make(0))
    check_with_mutations(rt, _counters_between_products, make, range(2))
    assert extern_count(rt) == 2
    # relu and sigmoid each need a kernel of their own (their producers are extern calls): the
    # three counters add none
    assert kernel_count(rt) == 3, compiled_graph_code(rt)


def compiled_graph_code(rt):
    from cpp_test_utils import compiled_graph
    return compiled_graph(rt).code


def _channels_last(*shape):
    return torch.randn(*shape).to(memory_format=torch.channels_last)


def test_per_channel_sums_of_a_channels_last_result_join_its_kernel():
    """A batch norm over channels-last activations: the pointwise result's loops run as it is
    stored ([N, H, W, C]), its per-channel sums as [C] x [N, H, W]. The same loops in another
    order: the pointwise is re-nested as [C, N, H, W] and joins the sums' kernel (ResNet-50's
    training graphs wrote each such result and read it back, 113 times per step)."""
    def f(x, g):
        y = torch.relu(x * 2 + 1) * g            # stored: a graph output (saved for backward)
        return y, y.sum((0, 2, 3)), (y * x).sum((0, 2, 3))
    rt = check(f, [_channels_last(2, 8, 5, 5), _channels_last(2, 8, 5, 5)])
    assert kernel_count(rt) == 1


def test_a_channels_last_consumer_of_per_channel_statistics_joins_their_kernel():
    """The normalisation after the statistics, over [N, H, W, C] again: re-nested as the sums'
    [C] x [N, H, W] (each channel's mean is then at hand), one kernel for the whole norm."""
    def f(x):
        mean = x.mean((0, 2, 3), keepdim=True)
        var = (x - mean).square().mean((0, 2, 3), keepdim=True)
        return torch.relu((x - mean) * torch.rsqrt(var + 1e-5))
    rt = check(f, [_channels_last(2, 8, 5, 5)])
    assert kernel_count(rt) == 1


def test_split_per_channel_sums_of_a_channels_last_result_join_its_kernel(monkeypatch):
    """On a GPU the statistics of a large batch norm are split in two stages (lowering/
    split_reduction.py): the first reduces [N, H/h, C] x [h, W]. The channels-last pointwise over
    [N, H, W, C] is re-nested and re-split to that and joins the first stage (Triton code
    generator, through its interpreter; the split thresholds lowered to reach it at test sizes)."""
    import os
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from tracetorch import compiler
    from tracetorch.compiler import config
    from tracetorch.compiler.backend.lowering import split_reduction
    monkeypatch.setattr(split_reduction, "_MIN_ELEMENTS_MANY", 1 << 10)
    monkeypatch.setattr(split_reduction, "_MIN_PROGRAM_WORK", 1024)   # [N, H', C] x [h, W], as at batch 32

    def f(x, g):
        y = torch.relu(x * 2 + 1) * g
        return y, y.sum((0, 2, 3)), (y * x).sum((0, 2, 3))
    kernels = {}
    for mode in ("on", "auto"):
        torch.manual_seed(0)
        compiler.reset()
        with config.patch({"backend.cpu_codegen": "triton", "backend.cache_enabled": False,
                           "backend.renest_fusion": mode}), \
                logs.testing.capture(level=logging.DEBUG) as events:
            rt = check(f, [_channels_last(4, 32, 8, 8), _channels_last(4, 32, 8, 8).abs()])
        assert [e.fields["lead_dims"] for e in events if e.name == "split_reduction"] == [2, 2]
        kernels[mode] = rt.compiled.code.count("@triton.jit")
    # y with the first stages, then the second stages; auto re-nests too: every access walks
    # along the channels (test_triton_re_nests_only_where_every_access_walks_one_way)
    assert kernels == {"on": 2, "auto": 2}


def test_a_bias_gradient_over_flattened_tokens_joins_the_product_it_sums():
    """A transformer's backward: the dropout backward g * m over [B, S, D] is stored (the matmuls
    read it) and its bias gradient sums it over B * S tokens ([D] x [B * S]). The sum's reduction
    loop is split as [B, S] and the product re-nested as [D, B, S]: one kernel (GPT-2's backward
    had 24 such pairs as two kernels each)."""
    def f(g, m, w):
        y = g * m
        return y @ w, y.reshape(-1, 8).sum(0)
    rt = check(f, [torch.randn(2, 6, 8), torch.randn(2, 6, 8), torch.randn(8, 5)])
    assert kernel_count(rt) == 1

    def stored_first(g, m):
        y = g * m
        return y, y.reshape(-1, 8).sum(0), y.reshape(-1, 8).amax(0)
    rt = check(stored_first, [torch.randn(2, 6, 8), torch.randn(2, 6, 8)])
    assert kernel_count(rt) == 1


def test_layernorm_weight_and_bias_gradients_share_their_split_kernels():
    """A LayerNorm's weight and bias gradients sum over every token: sum(g * xhat) and sum(g),
    [D] x [B, S]. Both are split on a GPU (lowering/split_reduction.py); the per-token mean and
    rstd the weight gradient reads are the same row for every output and no longer decide how its
    loads lie (indexing.access_kind), so both sums split alike and share their kernels: two
    launches, not four (ViT-S's backward: 24 LayerNorms, 247 -> 201 launches)."""
    import os
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from tracetorch import compiler
    from tracetorch.compiler import config

    def f(g, x, mean, rstd):
        xhat = (x - mean) * rstd
        return (g * xhat).sum((0, 1)), g.sum((0, 1))
    b, s, d = 32, 197, 384                      # ViT-S/16's tokens at batch 32
    torch.manual_seed(0)
    x = torch.randn(b, s, d)
    mean, rstd = x.mean(-1, keepdim=True), x.var(-1, keepdim=True).add(1e-6).rsqrt()
    compiler.reset()
    with config.patch({"backend.cpu_codegen": "triton", "backend.cache_enabled": False}), \
            logs.testing.capture(level=logging.DEBUG) as events:
        inputs = [torch.randn(b, s, d), x, mean, rstd]
        rt = compile_fn(f, inputs)
        for got, want in zip(rt(*inputs), f(*inputs)):   # sums of 6304 products: their order differs
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    splits = [(e.fields["splits"], e.fields.get("lead_dims")) for e in events if e.name == "split_reduction"]
    assert len(splits) == 2 and splits[0] == splits[1], splits
    assert rt.compiled.code.count("@triton.jit") == 2, rt.compiled.code


def test_split_bias_gradient_partials_join_the_product_they_sum(monkeypatch):
    """A transformer backward's bias gradient on a GPU: the sum over the B * S flattened tokens
    of the dropout backward product is split (lowering/split_reduction.py) into partials over
    chunks of tokens, [B * S / c, D] x [c], the chunks cutting across the product's [B, S, D]
    loops. The partials' outer loops are split further (ir.ComputedBuffer.outer_resplit:
    [B, S / c, D] x [c]) and the product re-nested to them: the product and the partials in one
    kernel, then the second pass (GPT-2's backward: 23 launches fewer). Every access walks along
    D, so Triton's 'auto' re-nests it (fusion._walks_one_way)."""
    import os
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from tracetorch import compiler
    from tracetorch.compiler import config
    from tracetorch.compiler.backend.lowering import split_reduction
    monkeypatch.setattr(split_reduction, "_MIN_ELEMENTS_MANY", 1 << 10)

    def f(g, m, w):
        y = g * m
        return y.reshape(-1, 64) @ w, y.reshape(-1, 64).sum(0)
    compiler.reset()
    with config.patch({"backend.cpu_codegen": "triton", "backend.cache_enabled": False}), \
            logs.testing.capture(level=logging.DEBUG) as events:
        rt = check(f, [torch.randn(2, 256, 64), torch.randn(2, 256, 64), torch.randn(64, 8)])
    splits = [e.fields for e in events if e.name == "split_reduction"]
    assert len(splits) == 1 and splits[0]["splits"] % 2 == 0 and splits[0]["splits"] > 2, splits
    assert rt.compiled.code.count("@triton.jit") == 2, rt.compiled.code


def test_triton_re_nests_only_where_every_access_walks_one_way(monkeypatch):
    """A channels-last product and its per-channel sums: the product re-nested into the sums'
    kernel when every load walks along the channels; not when one input is NCHW (its loads step
    along W, the rows: ResNet-50's max-pool backward so re-nested ran 4.7 ms against 0.2 ms
    alone), unless renest_fusion is 'on'."""
    import os
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from tracetorch import compiler
    from tracetorch.compiler import config
    from tracetorch.compiler.backend.lowering import split_reduction
    monkeypatch.setattr(split_reduction, "_MIN_ELEMENTS_MANY", 1 << 10)
    monkeypatch.setattr(split_reduction, "_MIN_PROGRAM_WORK", 1024)

    def f(x, g):
        y = torch.relu(x * 2 + 1) * g
        return y, y.sum((0, 2, 3))
    kernels = {}
    for layout, make_g in (("channels_last", lambda: _channels_last(4, 32, 8, 8)),
                           ("nchw", lambda: torch.randn(4, 32, 8, 8))):
        for mode in ("on", "auto"):
            torch.manual_seed(0)
            compiler.reset()
            with config.patch({"backend.cpu_codegen": "triton", "backend.cache_enabled": False,
                               "backend.renest_fusion": mode}):
                rt = check(f, [_channels_last(4, 32, 8, 8), make_g()])
            kernels[layout, mode] = rt.compiled.code.count("@triton.jit")
    # NCHW g: 'on' computes y in the sums' kernel, 'auto' keeps it apart (one kernel more)
    assert kernels == {("channels_last", "on"): 2, ("channels_last", "auto"): 2,
                       ("nchw", "on"): 1, ("nchw", "auto"): 2}, kernels


def test_refined_dims_split_a_dim_that_a_loop_is_a_piece_of():
    """The split reduction's [64 chunks, 768] x [32] against its product's [4, 512, 768] loops:
    64 = 4 x 16 and 512 = 16 x 32, so 64 is split; nothing to split, a symbolic or an empty size:
    None."""
    import sympy
    from tracetorch.compiler.backend.scheduler.fusion import _nestings, _refined_dims
    assert _refined_dims([4, 512, 768], [64, 768, 32]) == [4, 16, 768, 32]
    assert _nestings([4, 512, 768], [64, 768, 32]) == [([4, 16, 768, 32], [[0], [1, 3], [2]])]
    assert _refined_dims([4, 512], [4, 512]) is None
    assert _refined_dims([sympy.Symbol("s0"), 8], [8, 8]) is None
    assert _refined_dims([0, 8], [8, 0]) is None
