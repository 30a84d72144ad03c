"""The C launcher call of a kept Triton launch (tritonlaunch.Replay's direct path): the compiled
kernel's launch function called with what Triton 3.6's CudaLauncher would hand it, minus the
Python around it. Host TMA descriptors are encoded once per address and kept; tensors are passed
as their addresses; the stages' global scratch comes from torch's caching allocator as a bare
block. tests/test_launch_replay.py holds the call equal, argument for argument, to Triton's own."""
from __future__ import annotations

import os

import torch
from triton.backends.nvidia.driver import make_tensordesc_arg
from triton.runtime import _allocation

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
_MAX_MAPS = 512   # encoded tensor maps kept (a model has a few per layer shape)
_maps: dict = {}   # _tensor_map's encodings


def launcher(c, grid, nargs, rest, ptrs=()):
    """fire(args, stream): launch compiled kernel c on `grid` with args + rest, through its C
    launcher (Triton 3.6's CudaLauncher: the C function, under a wrapper that encodes host tensor
    descriptors where the kernel takes some), or through the CudaLauncher itself. `ptrs`: the
    positions of tensor arguments, passed to the C launcher as their addresses (an int skips its
    data_ptr() call and cuPointerGetAttribute; study.Kernel has checked they are on the GPU).
    The direct fire also carries .expanded(args, stream), the launch from arguments already in
    the C launcher's form, and .descs / .ptrs, the positions it converts (tritoncall uses them)."""
    run, (g0, g1, g2) = c.run, grid
    fn, packed = c.function, c.packed_metadata
    raw, descs = run.launch, {}
    if raw.__class__.__name__ != "builtin_function_or_method":   # the descriptor wrapper
        cells = dict(zip(raw.__code__.co_freevars, (x.cell_contents for x in raw.__closure__ or ())))
        raw = cells.get("launcher")
        indices, meta = sorted(cells.get("tensordesc_indices", ())), cells.get("tensordesc_meta")
        descs = dict(zip(indices, meta or [None] * len(indices)))
    if (raw is None or raw.__class__.__name__ != "builtin_function_or_method" or run.profile_scratch_size
            or any(i >= nargs for i in descs)):
        def fire(args, stream):   # Triton's Python launcher
            run(g0, g1, g2, stream, fn, packed, None, None, None, *args, *rest)
        return fire
    coop, pdl, size, align = run.launch_cooperative_grid, run.launch_pdl, run.global_scratch_size, \
        run.global_scratch_align
    size *= g0 * g1 * g2 * run.num_ctas
    order = sorted(descs, reverse=True)
    ptrs = tuple(i for i in ptrs if i not in descs)

    def fire(args, stream):
        args = list(args)
        for i in ptrs:
            args[i] = args[i].data_ptr()
        for i in order:   # from the end: each expansion leaves earlier positions in place
            args[i:i + 1] = _tensor_map(args[i], descs[i])
        expanded(args, stream)

    def expanded(args, stream):   # args as the C launcher takes them (fire's, or a recipe's own)
        if not size:
            return raw(g0, g1, g2, stream, fn, coop, pdl, None, None, packed, None, None, None, *args, *rest)
        alloc = _allocation._allocator.get()
        if alloc is not scratch or _raw_alloc is None:
            return raw(g0, g1, g2, stream, fn, coop, pdl, alloc(size, align, stream), None, packed, None, None,
                       None, *args, *rest)
        ptr = _raw_alloc(size, stream)   # what scratch() allocates, as a bare address (no tensor)
        try:
            raw(g0, g1, g2, stream, fn, coop, pdl, ptr, None, packed, None, None, None, *args, *rest)
        finally:
            _raw_delete(ptr)   # stream-ordered, as a dropped tensor: reused only by later work on `stream`
    fire.expanded, fire.descs, fire.ptrs = expanded, descs, frozenset(ptrs)   # for tritoncall's recipes
    return fire


# torch's caching allocator on the current GPU (absent from a CPU build of torch)
_raw_alloc = getattr(torch._C, "_cuda_cudaCachingAllocator_raw_alloc", None)
_raw_delete = getattr(torch._C, "_cuda_cudaCachingAllocator_raw_delete", None)


def scratch(size, alignment, stream):
    """The stages' global-scratch allocator (device-side TMA descriptors live there; Triton asks
    for it per launch): a block of torch's caching allocator on the current GPU, which is the
    operands' (study.Kernel launches under a device guard). A replayed launch takes the same block
    as a bare address (fire), about 2 us cheaper than this tensor."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def use_scratch():
    """triton.set_allocator(scratch), unless this thread's caller has set an allocator of its own."""
    if not INTERPRET and _allocation._allocator.get() is _allocation._NULL_ALLOCATOR:
        _allocation.set_allocator(scratch)


def _tensor_map(d, meta):
    """make_tensordesc_arg(d, meta): the encoded TMA descriptor (CUtensorMap) and d's shape and
    strides, kept per address, shape, strides, padding and kernel box (an encoding depends on nothing
    else; each launch copies it into the kernel's parameters), so a weight is encoded once."""
    if meta is None:   # no encoding: the launcher takes the base tensor itself
        return make_tensordesc_arg(d, meta)
    key = (d.base.data_ptr(), tuple(d.shape), tuple(d.strides), d.padding, id(meta))
    got = _maps.get(key)
    if got is None:
        if len(_maps) >= _MAX_MAPS:
            _maps.clear()
        got = _maps[key] = (meta, make_tensordesc_arg(d, meta))   # meta kept: its id stays its own
    return got[1]
