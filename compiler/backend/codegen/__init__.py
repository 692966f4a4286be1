"""Code generation: scheduled kernel groups -> C++ or Triton kernels, and the wrapper that runs them.

Modules, in the order data flows through them:
    common          the interface between the scheduler's KernelGroups and a code generator
    op_tables       the op dispatcher both languages share (each gives op tables + special ops)
    cpp             C++/OpenMP: one KernelGroup -> one `extern "C"` function
    cpp_ops         the op vocabulary as C++ lines
    cpp_dims        merging adjacent loop dimensions of pointwise kernels
    cpp_reduction   one reduction loop of a C++ row kernel
    cpp_column      C++ loops for reductions over outer dimensions
    cpp_rowcache    per-element values computed once per row and reused
    cpp_prefetch    software prefetch of the next row in row kernels
    triton          Triton: one KernelGroup -> one @triton.jit kernel plus its launcher
    triton_kernel   the state of one Triton kernel being generated, sympy index rendering
    triton_ops      the op vocabulary as Triton lines
    triton_online   online softmax for looped Triton reductions
    triton_scatter  Triton code for scatter buffers
    triton_combo    independent pointwise Triton kernels launched as one
    wrapper         the readable, standalone Python module that runs a compiled graph
"""
