"""Module globals and config objects: reads, writes, changes between calls."""
import types

import torch

from tests.compiler.frontend.pysem import World, brk, case

PROGRAMS = []
P = PROGRAMS.append

COUNTER = 0
SCALE = 1.0
MODE = "train"
TABLE = {"w": 1}
CONFIG = types.SimpleNamespace(alpha=1.0, use_bias=True, depth=2)


class Settings:
    eps = 1e-5
    flags = {"fast": False}


SETTINGS = Settings()


def _reset():
    global COUNTER, SCALE, MODE, TABLE
    COUNTER, SCALE, MODE, TABLE = 0, 1.0, "train", {"w": 1}
    CONFIG.alpha, CONFIG.use_bias, CONFIG.depth = 1.0, True, 2
    Settings.eps = 1e-5
    SETTINGS.flags = {"fast": False}
    SETTINGS.__dict__.pop("eps", None)


def _globals():
    return COUNTER, SCALE, MODE, dict(TABLE), vars(CONFIG).copy(), Settings.eps, \
        dict(SETTINGS.flags)


def world(f, before=None):
    _reset()
    return World(f, observe=_globals, before=before)


@case("global_state")
def global_counter_written():
    def f(x):
        global COUNTER
        COUNTER += 1
        return x + COUNTER
    return world(f)
P(global_counter_written)


@case("global_state")
def global_scalar_changed_between_calls():
    def f(x):
        return x * SCALE

    def before(i):
        global SCALE
        SCALE = float(i) - 0.5
    return world(f, before)
P(global_scalar_changed_between_calls)


@case("global_state")
def global_string_branch():
    def f(x):
        if MODE == "train":
            return x + 1
        return x - 1

    def before(i):
        global MODE
        MODE = ["train", "eval"][i % 2]
    return world(f, before)
P(global_string_branch)


@case("global_state")
def config_namespace_attribute_changes():
    def f(x):
        y = x * CONFIG.alpha
        for _ in range(CONFIG.depth):
            y = y + 1
        return y + 1 if CONFIG.use_bias else y

    def before(i):
        CONFIG.alpha = 1.0 + i
        CONFIG.use_bias = i != 1
        CONFIG.depth = i + 1
    return world(f, before)
P(config_namespace_attribute_changes)


@case("global_state")
def class_attribute_of_global_changes():
    def f(x):
        return x + SETTINGS.eps, SETTINGS.flags["fast"]

    def before(i):
        Settings.eps = 10.0 ** -i
        SETTINGS.flags["fast"] = i == 2
    return world(f, before)
P(class_attribute_of_global_changes)


@case("global_state")
def global_dict_mutated_in_frame():
    def f(x):
        TABLE["w"] = TABLE["w"] + 1
        TABLE["seen"] = True
        return x * TABLE["w"]
    return world(f)
P(global_dict_mutated_in_frame)


@case("global_state")
def global_written_before_break():
    def f(x):
        global SCALE
        SCALE = SCALE * 2
        brk()
        return x * SCALE
    return world(f)
P(global_written_before_break)


@case("global_state")
def global_replaced_by_other_type():
    def f(x):
        return x + (SCALE if isinstance(SCALE, float) else len(SCALE))

    def before(i):
        global SCALE
        SCALE = [1.5, "ab", 2.5][i]
    return world(f, before)
P(global_replaced_by_other_type)


@case("global_state", args=lambda i: (torch.ones(2), [0.0, -0.0, float("nan")][i]))
def float_sign_and_nan_arguments():
    import math

    def f(x, v):
        return x + 1, math.copysign(1.0, v), v != v
    return f
P(float_sign_and_nan_arguments)
