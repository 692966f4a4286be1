"""TRACE_LOGS parsing: the TORCH_LOGS syntax, applied to tracetorch's names.

    TRACE_LOGS="+dynamo,guards,recompiles"      frontend at DEBUG, two artifacts on
    TRACE_LOGS="-backend"                       backend at ERROR
    TRACE_LOGS="+compiler.backend.scheduler"    one module (or a whole package) at DEBUG
    TRACE_LOGS="all" / "+all"                   every component at INFO / DEBUG
    TRACE_LOGS="help" / "+help"                 list the visible / all names

`+` is DEBUG, `-` is ERROR, a bare name INFO; artifacts ignore the prefix (they are on or off).
A dotted name outside our packages names a stdlib logger of another library (as TORCH_LOGS
accepts any importable module); its records are printed in our format.
"""
from __future__ import annotations

import difflib
import importlib.util
import logging
import os
import re
from dataclasses import dataclass, field

from tracetorch.logs import registry

_ENTRY = re.compile(r"^([+-]?)([A-Za-z_][\w.]*)$")
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LogSettingsError(ValueError):
    """A TRACE_LOGS string (or set_logs call) that names something that does not exist."""


class LogsHelp(LogSettingsError):
    """Raised for TRACE_LOGS=help: the message is the help text (as TORCH_LOGS does)."""


@dataclass
class LogSettings:
    components: dict[str, int] = field(default_factory=dict)   # component -> level
    artifacts: set[str] = field(default_factory=set)           # explicitly named artifacts
    modules: dict[str, int] = field(default_factory=dict)      # our dotted module/package -> level
    foreign: dict[str, int] = field(default_factory=dict)      # other libraries' loggers -> level
    _levels: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def component_level(self, component: str) -> int:
        return self.components.get(component, logging.WARNING)

    def module_level(self, module: str) -> int:
        """Console level for a logger of ours named `module` (a module's __name__)."""
        level = self._levels.get(module)
        if level is None:             # settings are replaced, never mutated: cache per object
            level = self.component_level(registry.component_for_module(module))
            for prefix, lvl in self.modules.items():
                if module == prefix or module.startswith(prefix + "."):
                    level = min(level, lvl)
            self._levels[module] = level
        return level

    def artifact_enabled(self, name: str) -> bool:
        if name in self.artifacts:
            return True
        art = registry.ARTIFACTS.get(name)
        return (art is not None and not art.off_by_default
                and self.component_level(art.component) <= logging.DEBUG)

    def enabled_artifacts(self) -> set[str]:
        return {name for name in registry.ARTIFACTS if self.artifact_enabled(name)}


def _own_module_exists(dotted: str) -> bool:
    """Is `dotted` a module or package of ours? Checked on disk: never imports anything."""
    if dotted.split(".")[0] not in registry.OWN_PACKAGES:
        return False
    path = os.path.join(_PROJECT_ROOT, *dotted.split("."))
    return os.path.isdir(path) or os.path.isfile(path + ".py")


def _own_modules() -> list[str]:
    found = []
    for pkg in registry.OWN_PACKAGES:
        base = os.path.join(_PROJECT_ROOT, pkg)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "__"))]
            rel = os.path.relpath(dirpath, _PROJECT_ROOT).replace(os.sep, ".")
            found.append(rel)
            found += [f"{rel}.{f[:-3]}" for f in filenames
                      if f.endswith(".py") and f != "__init__.py"]
    return found


def _foreign_module_exists(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError):
        return False


def _unknown(entry: str, name: str, text: str) -> LogSettingsError:
    candidates = registry.all_names() + (_own_modules() if "." in name else [])
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return LogSettingsError(
        f"TRACE_LOGS: unknown log name '{entry}' in TRACE_LOGS={text!r}.{hint}\n"
        f"Valid names: {', '.join(registry.all_names())}, or a dotted module name "
        f"such as compiler.backend.\n"
        f"Run with TRACE_LOGS=help to list every name with its description.")


def parse(text: str) -> LogSettings:
    """Parse a TRACE_LOGS value. Raises LogsHelp for help, LogSettingsError for mistakes."""
    settings = LogSettings()
    text = text.strip()
    if not text:
        return settings
    for raw in text.split(","):
        entry = raw.strip()
        m = _ENTRY.match(entry)
        if not m:
            raise LogSettingsError(
                f"TRACE_LOGS: cannot parse entry {entry!r} in TRACE_LOGS={text!r}: each entry is "
                f"a name with an optional + (DEBUG) or - (ERROR) prefix, separated by commas, "
                f"e.g. TRACE_LOGS='+dynamo,guards'. Run with TRACE_LOGS=help for the names.")
        prefix, name = m.groups()
        name = registry.own_module_name(name)
        level = {"+": logging.DEBUG, "-": logging.ERROR}.get(prefix, logging.INFO)
        if name == "help":
            raise LogsHelp(help_text(verbose=prefix == "+"))
        if name == "all":
            for comp in registry.COMPONENTS:
                settings.components[comp] = level
        elif (comp := registry.canonical_component(name)) is not None:
            settings.components[comp] = level
        elif name in registry.ARTIFACTS:
            settings.artifacts.add(name)
        elif name in registry.TRACE_ONLY:
            raise LogSettingsError(
                f"TRACE_LOGS: '{name}' is a structured-trace record, not a log name; use "
                f"'{registry.TRACE_ONLY[name]}' for the console or TRACE_DIR=<folder> for the "
                f"trace. Run with TRACE_LOGS=help to list every name.")
        elif _own_module_exists(name):
            settings.modules[name] = level
        elif name.split(".")[0] not in registry.OWN_PACKAGES and _foreign_module_exists(name):
            settings.foreign[name] = level
        else:
            raise _unknown(entry, name, text)
    return settings


def help_text(verbose: bool = False) -> str:
    lines = ["TRACE_LOGS: a comma-separated list of names, each optionally prefixed by "
             "+ (DEBUG) or - (ERROR); a bare name is INFO.", "", "Components:"]
    aliases = {v: k for k, v in registry.ALIASES.items()}
    for c in registry.COMPONENTS.values():
        alias = f" (alias {aliases[c.name]})" if c.name in aliases else ""
        lines.append(f"  {c.name + alias:<24} {c.description}")
    lines += ["  all                      every component", "", "Artifacts (just enable):"]
    for a in registry.ARTIFACTS.values():
        if a.visible or verbose:
            off = "  [off by default: must be named]" if a.off_by_default else ""
            lines.append(f"  {a.name:<24} {a.description}{off}")
    if not verbose:
        lines.append("  (TRACE_LOGS=+help also lists the hidden ones)")
    lines += ["", "Dotted module names enable one module or a whole package, e.g. "
              "+compiler.backend.scheduler.",
              "Examples: TRACE_LOGS='+dynamo,guards'  TRACE_LOGS='-inductor,output_code'  "
              "TRACE_LOGS='+compiler.backend,schedule'",
              "TRACE_LOGS_FORMAT=glog|json|console; TRACE_LOGS_OUT=<file> also writes them to a "
              "file; TRACE_DIR=<folder> writes the structured trace."]
    return "\n".join(lines)


def from_kwargs(kwargs: dict) -> LogSettings:
    """set_logs(...) keyword arguments -> LogSettings (levels for components, bools for artifacts)."""
    settings = LogSettings()
    for key, value in kwargs.items():
        if value is None:
            continue
        if key == "modules":
            for mod, lvl in dict(value).items():
                lvl = logging.DEBUG if lvl is True else lvl
                if lvl is False:
                    continue
                mod = registry.own_module_name(mod)
                ours = mod.split(".")[0] in registry.OWN_PACKAGES
                (settings.modules if ours else settings.foreign)[mod] = lvl
        elif key == "all":
            for comp in registry.COMPONENTS:
                settings.components[comp] = value
        elif (comp := registry.canonical_component(key)) is not None:
            settings.components[comp] = int(value)
        elif key in registry.ARTIFACTS:
            if not isinstance(value, bool):
                raise LogSettingsError(f"set_logs: artifact '{key}' takes True or False, "
                                       f"got {value!r}")
            if value:
                settings.artifacts.add(key)
        else:
            close = difflib.get_close_matches(key, registry.all_names(), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise LogSettingsError(f"Unrecognized log or artifact name passed to set_logs: "
                                   f"{key}.{hint} Run with TRACE_LOGS=help to list every name.")
    return settings
