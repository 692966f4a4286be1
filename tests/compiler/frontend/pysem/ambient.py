"""Ambient torch state: grad mode, inference mode, autocast, default dtype, deterministic."""
import torch

from tests.compiler.frontend.pysem import World, case

PROGRAMS = []
P = PROGRAMS.append


def _restore(dtype=torch.float32):
    torch.set_grad_enabled(True)
    torch.set_default_dtype(torch.float32)
    torch.set_autocast_dtype("cpu", torch.bfloat16)
    torch.use_deterministic_algorithms(False)


@case("ambient")
def grad_mode_changes_between_calls():
    def f(x):
        return x * 2, torch.is_grad_enabled()

    def before(i):
        torch.set_grad_enabled(i % 2 == 0)
    return World(f, before=before, after=_restore)
P(grad_mode_changes_between_calls)


@case("ambient", args=lambda i: (torch.ones(2, requires_grad=True) * 1.0,))
def requires_grad_result_under_no_grad():
    def f(x):
        with torch.no_grad():
            y = x * 2
        return y, x * 3
    return f
P(requires_grad_result_under_no_grad)


@case("ambient")
def default_dtype_changes():
    def f(x):
        return torch.ones(2).dtype, x + torch.tensor(1.5)

    def before(i):
        torch.set_default_dtype([torch.float32, torch.float64, torch.float32][i])
    return World(f, before=before, after=_restore)
P(default_dtype_changes)


@case("ambient")
def autocast_dtype_query():
    def f(x):
        return x + 1, torch.get_autocast_dtype("cpu"), torch.is_autocast_enabled("cpu")

    def before(i):
        torch.set_autocast_dtype("cpu", [torch.bfloat16, torch.float16, torch.bfloat16][i])
    return World(f, before=before, after=_restore)
P(autocast_dtype_query)


def _maybe_inference(i):
    if i == 1:
        with torch.inference_mode():
            return (torch.ones(3),)
    return (torch.ones(3) * i,)


@case("ambient", args=_maybe_inference)
def inference_tensor_replaces_normal():
    def f(x):
        return x.is_inference(), x + 1
    return f
P(inference_tensor_replaces_normal)


@case("ambient")
def deterministic_flag_query():
    def f(x):
        return x + 1, torch.are_deterministic_algorithms_enabled()

    def before(i):
        torch.use_deterministic_algorithms(i == 1)
    return World(f, before=before, after=_restore)
P(deterministic_flag_query)


@case("ambient")
def set_grad_enabled_inside():
    def f(x):
        torch.set_grad_enabled(False)
        y = x * 2
        torch.set_grad_enabled(True)
        return y, torch.is_grad_enabled()
    return World(f, after=_restore)
P(set_grad_enabled_inside)
