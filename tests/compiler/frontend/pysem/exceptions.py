"""Exceptions: try/except/finally in the frame, raising, exceptions escaping."""
import torch

from tests.compiler.frontend.pysem import T, World, brk, case

PROGRAMS = []
P = PROGRAMS.append


@case("exceptions")
def try_except_keyerror():
    def f(x):
        d = {"a": 1}
        try:
            v = d["b"]
        except KeyError:
            v = 5
        return x + v
    return f
P(try_except_keyerror)


@case("exceptions")
def try_finally_order():
    log = []

    def f(x):
        log.clear()
        try:
            y = x + 1
            log.append("body")
        finally:
            log.append("finally")
        return y
    return World(f, observe=lambda: list(log))
P(try_finally_order)


@case("exceptions", args=lambda i: (torch.ones(2) * i, i))
def raise_depends_on_input():
    def f(x, n):
        if n == 1:
            raise ValueError("one")
        return x * n
    return f
P(raise_depends_on_input)


@case("exceptions")
def exception_caught_from_callee():
    def g(v):
        raise RuntimeError("boom")

    def f(x):
        try:
            g(x)
        except RuntimeError as e:
            return x + len(str(e))
        return x
    return f
P(exception_caught_from_callee)


@case("exceptions")
def exception_object_returned():
    def f(x):
        try:
            int("nope")
        except ValueError as e:
            err = e
        return x + 1, type(err).__name__
    return f
P(exception_object_returned)


@case("exceptions")
def zip_strict_in_try():
    def f(x):
        try:
            list(zip([1], [1, 2], strict=True))
            ok = True
        except ValueError:
            ok = False
        return x + 1, ok
    return f
P(zip_strict_in_try)


@case("exceptions")
def stop_iteration_from_next():
    def f(x):
        it = iter([x])
        a = next(it)
        try:
            next(it)
            more = True
        except StopIteration:
            more = False
        return a, more
    return f
P(stop_iteration_from_next)


@case("exceptions")
def with_block_and_break_inside():
    def f(x):
        with torch.no_grad():
            y = x * 2
            brk()
            y = y + 1
        return y, torch.is_grad_enabled()
    return f
P(with_block_and_break_inside)


class MyError(ValueError):
    pass


@case("exceptions", args=lambda i: (torch.ones(2) * i, i))
def nested_handlers_reraise_and_else_finally():
    log = []

    def inner(n):
        try:
            if n == 1:
                raise MyError("inner", n)
            return [1, 2][n]
        except IndexError:
            log.append("inner-index")
            raise

    def f(x, n):
        log.clear()
        try:
            v = inner(n)
        except (KeyError, MyError) as e:
            log.append(("caught", type(e).__name__, e.args))
            v = -1
        except IndexError as e:
            log.append(("outer-index", str(e)))
            v = -2
        else:
            log.append("else")
        finally:
            log.append("finally")
        return x + v, list(log)
    return World(f, observe=lambda: list(log))
P(nested_handlers_reraise_and_else_finally)


@case("exceptions")
def exception_in_loop_with_continue():
    def f(x):
        d = {"a": 1, "c": 3}
        total = 0
        for k in "abcd":
            try:
                total += d[k]
            except KeyError:
                total += 10
                continue
            total *= 2
        return x + total
    return f
P(exception_in_loop_with_continue)


@case("exceptions", args=lambda i: (torch.ones(2) * i, [1, 2, 3][: i + 1]))
def uncaught_exception_type_mismatch():
    def f(x, lst):
        try:
            return x + lst[2]
        except KeyError:
            return x
    return f
P(uncaught_exception_type_mismatch)


@case("exceptions")
def exception_returned_and_isinstance():
    def f(x):
        try:
            raise MyError("bad", 3)
        except ValueError as e:
            caught = e
        return x + caught.args[1], isinstance(caught, MyError), caught
    return f
P(exception_returned_and_isinstance)


@case("exceptions", args=lambda i: (T(i + 2, 3, seed=i),), calls=5)
def break_inside_with_over_changing_sizes():
    def f(x):
        with torch.no_grad():
            for i in range(2):
                x = x * 2 + i
                brk(x.shape[0])
        with torch.enable_grad():
            y = x.sum(0)
            brk()
        return y, torch.is_grad_enabled()
    return f
P(break_inside_with_over_changing_sizes)
