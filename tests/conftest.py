import os

import torch

# Triton kernels for CPU tensors run in Triton's interpreter, which must be switched on before
# triton is first imported (its own @jit helpers are made interpretable at import time).
# On a machine with a GPU the real Triton is used instead.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
