"""Registers and spills of every generated Triton kernel, compiled for a GPU target on any machine.

A kernel whose tile does not fit in registers spills to local memory and runs several times slower
than its loads and stores alone would (session 23: ResNet-50's relu/batch-norm-backward kernels,
32x1024 tiles, used 255 registers and spilled 208 bytes per thread on sm_90). Spills show in
Triton's compiled binary, so they can be found without the GPU: this script compiles each
kernel's launch configurations (the default and the autotuning candidates its first call would
compile: TritonLauncher.precompile_items) for `--arch` with Triton's bundled ptxas, and reads the
registers and stack bytes per thread with cuobjdump (and the warps an SM can hold at that
register count), and counts the PTX's vector and scalar global loads and stores.

    # the kernels of one compiled graph (a TRACE_COMPILE_DEBUG folder or an output_code.py)
    python scripts/kernel_registers.py trace_debug/latest
    # compile a real model at its benchmark size on the CPU first (needs timm / transformers);
    # kernels are generated but not run, as on CUDA (channels_last convolutions)
    python scripts/kernel_registers.py --model resnet50 --train
    python scripts/kernel_registers.py --model llama8 --dtype bfloat16

Kernels generated for CPU tensors import the Triton interpreter's libdevice; the GPU one is put
in its place. --model compiles as for CUDA (harness.kernels_not_run: channels_last convolutions,
float32 var accumulation); a folder given as a path holds what its run generated (a CPU run's
var statistics in float64). Kernels with symbolic sizes are listed as skipped (no sizes to
specialise on).
Exit status 1 when a kernel spills and --fail-on-spill is given.
"""
import argparse
import ast
import glob
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def output_code_files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    files = sorted(glob.glob(os.path.join(path, "**", "output_code.py"), recursive=True))
    if not files:
        raise SystemExit(f"kernel_registers: no output_code.py under {path!r} "
                         "(give a TRACE_COMPILE_DEBUG folder or an output_code.py file)")
    return files


def launcher_definitions(source: str) -> list[str]:
    """The `name = TritonLauncher(...)` statements of an output code module, as source text."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                getattr(node.value.func, "id", None) == "TritonLauncher":
            out.append(ast.get_source_segment(source, node))
    return out


def gpu_launcher(name, source, **kw):
    """A TritonLauncher for the GPU from a definition written for either device: the kernel
    module's imports for the interpreter (codegen/triton.module_imports) become the GPU's."""
    from tracetorch.compiler.backend.codegen.triton import module_imports
    from tracetorch.compiler.backend.runtime.triton_launch import TritonLauncher
    cpu, gpu = "\n".join(module_imports(True)), "\n".join(module_imports(False))
    kw["interpret"] = False
    if kw.get("persistent_source"):
        kw["persistent_source"] = kw["persistent_source"].replace(cpu, gpu)
    return TritonLauncher(name, source.replace(cpu, gpu), **kw)


def resource_usage(compiled, tool: str) -> tuple[int, int]:
    """(registers, stack bytes) per thread of a compiled kernel, from its cubin."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.asm["cubin"])
    try:
        text = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True,
                              text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    regs, stack = re.search(r"REG:(\d+)", text), re.search(r"STACK:(\d+)", text)
    return int(regs.group(1)) if regs else -1, int(stack.group(1)) if stack else -1


def memory_ops(compiled) -> str:
    """Global loads and stores in the PTX, vector (v2/v4) and scalar: a kernel over contiguous data
    with scalar accesses lost its vectorization (alignment or contiguity Triton could not prove)."""
    ptx = compiled.asm["ptx"]
    counts = []
    for op in ("ld", "st"):
        found = re.findall(rf"\b{op}\.global((?:\.\w+)*)", ptx)
        vector = sum(1 for f in found if ".v2" in f or ".v4" in f)
        counts.append(f"{op} {vector}v/{len(found) - vector}s")
    return " ".join(counts)


def resident_warps(regs: int, warps: int) -> int:
    """Warps of this kernel an sm_90 SM holds at once as far as registers allow (64 at most;
    shared memory, which reductions also use, may allow fewer): registers are allocated per warp
    in units of 256, from 65536 per SM. Few resident warps hide memory latency poorly."""
    if regs <= 0:
        return 0
    per_warp = -(-regs * 32 // 256) * 256
    blocks = min(32, 65536 // (per_warp * warps))
    return min(64, blocks * warps)


def config_text(spec, fn) -> str:
    names = fn.arg_names
    consts = ", ".join(f"{names[i]}={v}" for i, v in spec.constexprs if names[i].endswith("BLOCK"))
    return f"{consts}, warps={dict(spec.options)['num_warps']}"


def scan(files: list[str], arch: int) -> tuple[list[tuple], int]:
    import triton
    from tracetorch.compiler.backend.runtime import triton_compile_worker as worker
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    target = worker.make_target("cuda", arch, 32)
    rows, skipped = [], 0
    for path in files:
        for stmt in launcher_definitions(Path(path).read_text()):
            scope = {"TritonLauncher": gpu_launcher}
            exec(stmt, scope)
            launcher = next(v for k, v in scope.items() if k not in ("TritonLauncher", "__builtins__"))
            items = launcher.precompile_items()
            if not items:
                skipped += 1
                continue
            for kernel, spec in items:
                compiled = worker.compile_spec(kernel.fn, spec.types, spec.descs, spec.constexprs,
                                               dict(spec.options), target)
                regs, stack = resource_usage(compiled, tool)
                warps = resident_warps(regs, dict(spec.options)["num_warps"])
                rows.append((launcher.name, launcher.kind + (" outer" if launcher.outer else ""),
                             config_text(spec, kernel.fn), regs, stack, warps, memory_ops(compiled)))
    return rows, skipped


def dump_model(args) -> str:
    """Compile --model on the CPU with Triton code generation in a child process (the Triton
    interpreter must be on when triton is imported there, and off here to compile for the GPU);
    returns the debug folder holding its output code."""
    folder = tempfile.mkdtemp(prefix="kernel_registers_")
    env = dict(os.environ, TRITON_INTERPRET="1", TRACE_COMPILE_DEBUG="1", TRACE_DEBUG_DEBUG_DIR=folder)
    cmd = [sys.executable, __file__, "--dump-model", args.model, "--dtype", args.dtype] + \
        (["--train"] if args.train else [])
    subprocess.run(cmd, env=env, check=True)
    return folder


def dump_model_child(name: str, train: bool, dtype: str) -> None:
    """Compile and call the model with kernel launches skipped: the code is what CUDA would get
    (channels_last convolutions, biases in our kernels); the values are not computed."""
    import torch
    from scripts import bench_real_models as bench, harness
    from tracetorch import compiler
    model, inputs = bench.build_real(name, "cpu", getattr(torch, dtype))
    model.train(train)
    with harness.kernels_not_run():
        compiled = compiler.compile(model)
        if train:
            out = bench._main_tensor(bench._call(compiled, inputs))
            out.float().sum().backward()
        else:
            with torch.no_grad():
                bench._call(compiled, inputs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", nargs="?", help="TRACE_COMPILE_DEBUG folder or output_code.py")
    p.add_argument("--model", help="compile this model of scripts/bench_real_models.py first")
    p.add_argument("--train", action="store_true", help="with --model: forward and backward graphs")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                   help="with --model: weights and inputs (the inference benchmark runs bfloat16)")
    p.add_argument("--arch", type=int, default=90, help="CUDA compute capability (90: H100/H200)")
    p.add_argument("--fail-on-spill", action="store_true")
    p.add_argument("--dump-model", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.dump_model:
        dump_model_child(args.dump_model, args.train, args.dtype)
        return 0
    if bool(args.path) == bool(args.model):
        p.error("give either a path or --model")
    if os.environ.get("TRITON_INTERPRET") == "1":
        p.error("unset TRITON_INTERPRET: kernels are compiled for the GPU here")
    path = dump_model(args) if args.model else args.path
    rows, skipped = scan(output_code_files(path), args.arch)
    rows = sorted(set(rows), key=lambda r: (-r[4], -r[3], r[0]))   # one row per kernel and config
    print(f"{'kernel':<56} {'kind':<16} {'config':<34} {'regs':>5} {'spill B':>8} {'warps/SM':>8}  "
          "global loads/stores")
    for name, kind, cfg, regs, stack, warps, mem in rows:
        print(f"{name[:56]:<56} {kind:<16} {cfg:<34} {regs:>5} {stack:>8} {warps:>5}/64  {mem}")
    spilling = sorted({r[0] for r in rows if r[4] > 0})
    print(f"\n{len(rows)} configs of {len({r[0] for r in rows})} kernels compiled for sm_{args.arch}; "
          f"{len(spilling)} kernels spill; {skipped} kernels skipped (symbolic sizes or no pointer types)")
    return 1 if spilling and args.fail_on_spill else 0


if __name__ == "__main__":
    sys.exit(main())
