"""Runtime: what generated code needs while it builds and runs (no torch-level logic here).

Modules, in the order data flows through them:
    cpp_build                build C++ kernel sources into shared objects and load them
    triton_compile           explicit and ahead-of-time (worker) compilation of Triton kernels
    triton_compile_worker    one kernel's compile, in this process or a worker (also a script)
    triton_launch            write, import and launch generated Triton kernels
    triton_helpers           @triton.jit helpers generated kernels call (`th`)
    triton_interp_libdevice  libdevice stand-ins under the Triton interpreter (CPU tests)
    wrapper_support          small helpers the generated output code imports
    cudagraphs               record and replay compiled inference graphs as CUDA graphs
    cudagraph_training       the same for a training forward and its backward (saved values in place)
    cudagraph_buckets        which symbolic size an inference recording may pad to its bucket, and why not

This file imports nothing: triton_compile_worker loads its siblings without running package
__init__ files that import torch.
"""
