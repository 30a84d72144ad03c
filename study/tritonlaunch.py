"""A cheaper host path for the Triton stages' launches: `replay(kernel)[grid](*args, **kwargs)`.

`kernel[grid](...)` costs 20-90 us of host time per call in Triton 3.6 on the H100 machine's CPU
(binding and specialising every argument, the autotuner's key and pre-hooks). The first call of
each *launch signature* goes through Triton (compiling, autotuning) and what it launched is kept:
the compiled kernel, its grid and the arguments Triton bound after the positional ones. A later
call of that signature hands its own positional arguments with those to the compiled kernel's C
launcher, encoding host tensor descriptors and allocating global scratch first as Triton's
launcher does (its internals are read once per signature; where they differ, its Python launcher
runs). The first signature's argument classes get a generated signature form (no loop).

The signature is a superset of what Triton specialises on and of what an autotuner key or a
heuristic can read: the current device; each positional argument's type; ints, bools, strings
and every keyword argument by value; tensors by dtype and 16-byte alignment; host tensor
descriptors by dtype, alignment, shape, strides, box and padding; floats passed to a
non-constexpr parameter by type alone (Triton does not specialise on a float's value). A grid
given as a tuple must equal the kept launch's, else Triton launches it and it is kept instead (a
forced plan, e.g. s14's launch(..., p), may change the grid under one signature); a callable
grid must be a function of the arguments and the chosen config (every stage's is). Triton's own path
runs where a replay could differ (docs/ARCHITECTURE.md, "A Triton call's host path"): under
TRITON_INTERPRET, with a launch hook, while JITFunction.run or Autotuner.run is patched, and
where an autotuner no longer holds the recorded config.
"""
from __future__ import annotations

import threading
import weakref

import torch
from triton import knobs
from triton.knobs import HookChain
from triton.runtime.autotuner import Autotuner
from triton.runtime.driver import driver
from triton.runtime.jit import JITFunction
from triton.tools.tensor_descriptor import TensorDescriptor

from .tritonfire import INTERPRET, launcher, scratch, use_scratch  # noqa: F401 (the stages' names)

_MAX_ENTRIES = 512   # launch signatures kept per kernel (a model has a few per layer shape)
_PLAIN = (int, float, bool, str, type(None))   # keyword values a signature holds by value
counts = {"replayed": 0, "triton": 0, "recipe": 0}   # launches by each path (tests read them)
_replays = weakref.WeakSet()
recording = threading.local()   # .seen: while this thread's record_call runs, the launches made


def cdiv(x: int, y: int) -> int:
    """Ceiling division on the host (triton.cdiv is a constexpr function: ~2 us a call)."""
    return -(-x // y)


def stored_layout(t, transposed=False):
    """(rows, cols, row stride) of t as stored, row-major: of its transpose where t is a transposed
    view (`transposed`), read without making that view (a view costs host time). A single stored
    row's stride is whatever torch reports (1 for the [1, M] view of an [M, 1] tensor): rounded
    up to a 16-byte multiple, it addresses nothing and TMA accepts it."""
    if transposed:
        rows, cols, ld = t.shape[1], t.shape[0], t.stride(1)
    else:
        rows, cols, ld = t.shape[0], t.shape[1], t.stride(0)
    unit = max(1, 16 // t.element_size())
    if rows <= 1 and ld % unit:
        ld = -(-max(cols, 1) // unit) * unit
    return rows, cols, ld


def descriptor(t, block_shape, transposed=False) -> TensorDescriptor:
    """A host TMA descriptor over t as stored (stored_layout) with the given box, made without
    TensorDescriptor's constructor checks (~1 us a call): the stage's `unsupported` has refused
    what TMA cannot load (bases and row strides not 16-byte aligned)."""
    rows, cols, ld = stored_layout(t, transposed)
    return unchecked_descriptor(t, (rows, cols), (ld, 1), block_shape, "zero")


def unchecked_descriptor(base, shape, strides, block_shape, padding) -> TensorDescriptor:
    """TensorDescriptor(base, shape, strides, block_shape, padding) without its checks."""
    d = object.__new__(TensorDescriptor)
    d.base, d.shape, d.strides, d.block_shape, d.padding = base, shape, strides, block_shape, padding
    return d


def _unhooked(h) -> bool:
    """No launch hook: Triton 3.6 keeps an empty HookChain there (a profiler adds to it, or sets one)."""
    return h is None or (h.__class__ is HookChain and not h.calls)


def _direct_ok() -> bool:
    return (not INTERPRET and _unhooked(knobs.runtime.launch_enter_hook)
            and _unhooked(knobs.runtime.launch_exit_hook)
            and getattr(JITFunction.run, "__qualname__", "") == "JITFunction.run"
            and getattr(Autotuner.run, "__qualname__", "") == "Autotuner.run")


def forget():
    """Drop every kept launch: each kernel's next call goes through Triton again."""
    for r in list(_replays):
        r.drop()


def replay(kernel) -> "Replay":
    """The kernel's Replay, made on first use and kept on the kernel object."""
    r = getattr(kernel, "_study_replay", None)
    if r is None:
        r = Replay(kernel)
        kernel._study_replay = r
    return r


def _item(i, x, value_floats):
    """Argument i's part of the signature, as a Python expression over `a{i}` (None: no form)."""
    t, v = x.__class__, f"a{i}"
    if t is float:
        return f"({i}, {v})" if i in value_floats else f"T{i}"
    if t is int or t is bool or t is str or x is None:
        return f"(T{i}, {v})"
    if isinstance(x, torch.Tensor):
        return f"({v}.dtype, {v}.data_ptr() & 15 == 0)"
    if t is TensorDescriptor:
        return (f"({v}.base.dtype, {v}.base.data_ptr() & 15 == 0, tuple({v}.shape), tuple({v}.strides), "
                f"tuple({v}.block_shape), {v}.padding)")
    return None


def _signature(args, kwargs, value_floats):
    """The launch signature (module docstring) of any call, or None: never replayed. The same
    rules as _item's forms, evaluated here (tests/test_launch_replay.py holds the two equal)."""
    key = [torch._C._cuda_getDevice()]
    for i, x in enumerate(args):
        t = x.__class__
        if t is float:
            key.append((i, x) if i in value_floats else t)
        elif t is int or t is bool or t is str or x is None:
            key.append((t, x))
        elif isinstance(x, torch.Tensor):
            key.append((x.dtype, x.data_ptr() & 15 == 0))
        elif t is TensorDescriptor:
            key.append((x.base.dtype, x.base.data_ptr() & 15 == 0, tuple(x.shape), tuple(x.strides),
                        tuple(x.block_shape), x.padding))
        else:
            return None
    for v in kwargs.values():
        if v.__class__ not in _PLAIN:   # a tensor keyword would be kept (and replayed) by identity
            return None
    key.append(tuple(kwargs.items()))
    return tuple(key)


def _signature_for(args, kwargs, value_floats):
    """_signature as one generated expression for calls with these argument classes and keyword
    names (what every later call of a stage passes); other calls fall back to _signature."""
    names = {f"T{i}": x.__class__ for i, x in enumerate(args)}
    forms = [_item(i, x, value_floats) for i, x in enumerate(args)]
    if None in forms or any(v.__class__ not in _PLAIN for v in kwargs.values()):
        return None
    a = ", ".join(f"a{i}" for i in range(len(args)))
    guard = " and ".join([f"a{i}.__class__ is T{i}" for i in range(len(args))] + ["kwargs.keys() == KW"]
                         + [f"kwargs[{k!r}].__class__ in PLAIN" for k in kwargs])
    src = (f"def sig(args, kwargs):\n"
           f"    if len(args) != {len(args)}:\n        return general(args, kwargs, VF)\n"
           f"    {a}, = args\n"
           f"    if not ({guard}):\n        return general(args, kwargs, VF)\n"
           f"    return (device(), {', '.join(forms)}, tuple(kwargs.items()))\n")
    ns = dict(names, KW=set(kwargs), PLAIN=_PLAIN, VF=value_floats, general=_signature,
              device=torch._C._cuda_getDevice)
    exec(src, ns)
    return ns["sig"]


class _Entry:
    __slots__ = ("compiled", "fire", "tuners", "grid", "alive")   # alive: still in its Replay's entries

    def __init__(self, compiled, fire, tuners, grid=None):   # grid: the launch's, unless callable
        self.compiled, self.fire, self.tuners, self.grid, self.alive = compiled, fire, tuners, grid, True

    def tuners_hold(self) -> bool:
        """Every autotuner still holds the config this launch ran with (False: a test or a user
        reset it or gave it other configs; Triton decides again)."""
        for at, k, cfg, cfgs in self.tuners:
            if at.configs is not cfgs or (k is not None and at.cache.get(k) is not cfg):
                return False
        return True


class Replay:
    """Launches `kernel` (a JITFunction, optionally under autotuners and heuristics) through
    Triton once per launch signature and directly through the compiled launcher after that."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.entries: dict = {}
        _replays.add(self)
        self.layers, fn = [], kernel
        while not INTERPRET and not isinstance(fn, JITFunction):   # autotuners / heuristics, outermost first
            if not hasattr(fn, "fn"):
                raise TypeError(f"kernel must be a @triton.jit function, optionally autotuned; got {type(kernel)}")
            self.layers.append(fn)
            fn = fn.fn
        self.jit = fn
        self.value_floats = frozenset() if INTERPRET else frozenset(p.num for p in fn.params if p.is_constexpr)
        self.general = self.signature = lambda args, kwargs: _signature(args, kwargs, self.value_floats)

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(grid, args, kwargs)

    def drop(self):
        """Forget every kept launch (a recipe over one then steps aside)."""
        for e in self.entries.values():
            e.alive = False
        self.entries.clear()

    def run(self, grid, args, kwargs):
        if not _direct_ok():
            counts["triton"] += 1
            return self.kernel[grid](*args, **kwargs)
        key = self.signature(args, kwargs)
        e = self.entries.get(key) if key is not None else None
        if e is not None and e.tuners_hold() and (e.grid is None or e.grid == grid):
            e.fire(args, driver.active.get_current_stream(key[0]))
            counts["replayed"] += 1
            seen = getattr(recording, "seen", None)
            if seen is not None:
                seen.append((self, key, args))
            return e.compiled
        out = self._record(key, grid, args, kwargs)
        seen = getattr(recording, "seen", None)
        if seen is not None:
            seen.append((self, key, args))
        return out

    def _record(self, key, grid, args, kwargs):
        """Triton's own launch; what it launched is kept under `key` when it can be replayed."""
        counts["triton"] += 1
        seen, got = {}, {}

        def hook(*a, **k):   # JITFunction.run calls it with the arguments it binds (the last call
            seen["call"] = (a, k)   # is the launch: an autotuner's timing runs come first)

        def grid_of(meta):
            got["grid"] = g = grid(meta) if callable(grid) else grid
            return g

        self.jit.pre_run_hooks.append(hook)
        try:
            compiled = self.kernel[grid_of](*args, **kwargs)
        finally:
            self.jit.pre_run_hooks.remove(hook)
        if key is None or "call" not in seen or "grid" not in got or not hasattr(compiled, "packed_metadata"):
            return compiled
        a, k = seen["call"]
        binder = self.jit.device_caches[driver.active.get_current_device()][4]
        bound = list(binder(*a, **k)[0].values())
        if len(a) != len(args) or any(x is not y for x, y in zip(bound, args)):
            return compiled   # not the positional arguments passed: nothing to replay safely
        tuners = []
        for at in self.layers:
            if isinstance(at, Autotuner):
                at_key = self._tuner_key(at, args, kwargs) if len(at.configs) > 1 else None
                cfg = at.cache.get(at_key) if at_key is not None else at.configs[0]
                if cfg is None:
                    return compiled
                tuners.append((at, at_key, cfg, at.configs))
        if len(self.entries) >= _MAX_ENTRIES:
            self.drop()
        grid3 = (tuple(got["grid"]) + (1, 1))[:3]
        ptrs = tuple(i for i, x in enumerate(args) if isinstance(x, torch.Tensor))
        fire = launcher(compiled, grid3, len(args), tuple(bound[len(args):]), ptrs)
        old = self.entries.get(key)
        if old is not None:
            old.alive = False
        self.entries[key] = _Entry(compiled, fire, tuple(tuners), None if callable(grid) else grid)
        if self.signature is self.general:   # the first signature kept: generate its form
            self.signature = _signature_for(args, kwargs, self.value_floats) or self.general
        return compiled

    @staticmethod
    def _tuner_key(at, args, kwargs):
        """The autotuner's cache key for this call, as Autotuner.run forms it (Triton 3.6)."""
        all_args = {**dict(zip(at.arg_names, args)), **kwargs}
        named = {n: v for n, v in all_args.items() if n in at.arg_names}
        key = [named[n] for n in at.keys if n in named]
        key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        return tuple(key)

