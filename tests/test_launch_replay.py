"""study.tritonlaunch on the CPU: the launch signature separates every call Triton would compile or
tune differently (alignment, int values, bool against int, constexpr floats, descriptor boxes)
and nothing else; host cdiv and the unchecked TMA descriptor agree with Triton's own. The replayed
launches themselves run in tests/test_gpu_replay.py."""
import types

import pytest
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from study import tritonfire, tritonlaunch
from study.tritonlaunch import Replay, _signature, _signature_for, cdiv, descriptor

CONSTEXPR_FLOATS = frozenset({5})   # argument 5 stands for a constexpr float parameter


@pytest.fixture
def device0(monkeypatch):
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)


@pytest.fixture
def sig(device0):
    return lambda *args, **kw: _signature(args, kw, CONSTEXPR_FLOATS)


def test_signature_keeps_what_triton_specialises_on(sig):
    x, y = torch.empty(64, 64, dtype=torch.bfloat16), torch.empty(64, 64, dtype=torch.bfloat16)
    off = torch.empty(4097, dtype=torch.bfloat16)[1:].view(64, 64)
    base = sig(x, y, 64, True, 1.0, 2.0, LAYOUT="NT")
    assert sig(y, x, 64, True, 3.5, 2.0, LAYOUT="NT") == base          # new tensors, a new runtime float
    assert sig(off, y, 64, True, 1.0, 2.0, LAYOUT="NT") != base   # 2 B off
    assert sig(x.float(), y, 64, True, 1.0, 2.0, LAYOUT="NT") != base  # dtype
    assert sig(x, y, 65, True, 1.0, 2.0, LAYOUT="NT") != base          # an int's value
    assert sig(x, y, 64, 1, 1.0, 2.0, LAYOUT="NT") != base             # int 1 is not True
    assert sig(x, y, 64, True, 1.0, 2.5, LAYOUT="NT") != base          # a constexpr float's value
    assert sig(x, y, 64, True, 1.0, 2.0, LAYOUT="NN") != base          # a keyword's value
    assert sig(x, y, 64, True, 1.0, 2.0, LAYOUT="NT", num_warps=8) != base


def test_signature_refuses_what_it_cannot_key(sig):
    x = torch.empty(8, 8)
    assert sig(x, SCALE=x) is None          # a tensor keyword would be replayed by identity
    assert sig(x, object()) is None          # an argument of unknown kind


def test_generated_signature_is_the_general_one(device0):
    """The form generated from a first call gives _signature's value for every call of the same
    argument classes and keyword names, and hands any other call to _signature."""
    x = torch.empty(64, 64, dtype=torch.bfloat16)
    d = descriptor(x, [64, 64])
    first = ((d, x, 64, True, 1.0, 2.0), {"LAYOUT": "NT", "VEC": 8})
    fast = _signature_for(*first, CONSTEXPR_FLOATS)
    off = torch.empty(4097, dtype=torch.bfloat16)[1:].view(64, 64)
    calls = [first, ((descriptor(off, [64, 32]), off.float(), 65, False, 3.0, 2.5), {"LAYOUT": "NN", "VEC": 1}),
             ((d, x, 64, 1, 1.0, 2.0), {"LAYOUT": "NT", "VEC": 8}),          # int for bool: other classes
             ((d, x, 64, True, 1.0), {"LAYOUT": "NT", "VEC": 8}),            # fewer arguments
             ((d, x, 64, True, 1.0, 2.0), {"VEC": 8, "LAYOUT": "NT"}),       # keywords in another order
             ((d, x, 64, True, 1.0, 2.0), {"LAYOUT": "NT", "VEC": x}),       # a tensor keyword: None
             ((d, x, 64, True, 1.0, 2.0), {"LAYOUT": "NT"})]
    for args, kw in calls:
        assert fast(args, kw) == _signature(args, kw, CONSTEXPR_FLOATS), (args[2:], kw.keys())
    assert fast(*calls[1]) != fast(*first) and fast(*calls[2]) != fast(*first)


def test_descriptor_signature_reads_box_shape_and_strides(sig):
    x = torch.empty(128, 64, dtype=torch.float16)
    d1, d2 = descriptor(x, [64, 64]), descriptor(x, [128, 64])
    assert sig(d1) != sig(d2) and sig(d1) == sig(descriptor(torch.empty_like(x), [64, 64]))
    assert sig(descriptor(x[:, :32], [64, 32])) != sig(descriptor(x[:64], [64, 32]))   # strides differ


def test_descriptor_matches_tritons_constructor():
    x = torch.empty(96, 40, dtype=torch.bfloat16)[:, :32]
    d, ref = descriptor(x, [64, 32]), TensorDescriptor.from_tensor(x, [64, 32])
    assert isinstance(d, TensorDescriptor)
    assert (d.base is ref.base and list(d.shape) == list(ref.shape) and list(d.strides) == list(ref.strides)
            and d.block_shape == ref.block_shape and d.padding == ref.padding)


def test_cdiv():
    assert [cdiv(x, 16) for x in (0, 1, 15, 16, 17, 4096)] == [0, 1, 1, 1, 2, 256]


def test_forget_drops_every_kept_launch():
    from study.tritonlaunch import _Entry

    r = Replay.__new__(Replay)
    e = _Entry("compiled", None, ())
    r.entries = {("k",): e}
    tritonlaunch._replays.add(r)
    tritonlaunch.forget()
    assert r.entries == {} and not e.alive   # a recipe over e steps aside


@pytest.mark.parametrize("layout", ["NN", "NT", "TN"])
@pytest.mark.parametrize("shape", [(8, 24), (1, 24), (24, 1)])
def test_descriptors_read_operands_as_stored_without_views(layout, shape):
    """descriptor(t, box, transposed) covers what tritonlib.stored_operands' views cover (the
    same memory, shape and row stride, a single stored row's stride rounded up as there)."""
    from study.operands import TRANSPOSED
    from study.tritonlib import stored_operands

    M, K = shape
    a_t, b_t = TRANSPOSED[layout]
    a = torch.empty(K, M, dtype=torch.float16).t() if a_t else torch.empty(M, K, dtype=torch.float16)
    b = torch.empty(7, K, dtype=torch.float16).t() if b_t else torch.empty(K, 7, dtype=torch.float16)
    for t, transposed, view in zip((a, b), (a_t, b_t), stored_operands(a, b, layout)):
        d = descriptor(t, [8, 8], transposed)
        assert d.base.data_ptr() == view.data_ptr()
        assert tuple(d.shape) == tuple(view.shape) and tuple(d.strides) == (view.stride(0), 1)


def test_single_stored_row_stride_rounded_up():
    from study.tritonlib import stored_operands

    row = torch.empty(20, 1, dtype=torch.float16).t()   # [1, 20], torch reports row stride 1
    assert row.stride(0) == 1
    assert descriptor(row, [8, 8]).strides == (24, 1) == stored_operands(row, row.t(), "NN")[0].stride()


# --- the replay and recipe paths with a stand-in launcher (the real ones: test_gpu_replay.py) ---

@triton.jit
def _stand_in_kernel(a_ptr, d, n, x, BLOCK: tl.constexpr):
    pass


@pytest.fixture
def direct(monkeypatch, device0):
    """Replay's direct path on a CPU: no hook or patch to step aside for, stream 7; each fire
    appends (args, stream) to the returned list."""
    from study import tritoncall
    from study.tritonlaunch import _Entry

    monkeypatch.setattr(tritonlaunch, "_direct_ok", lambda: True)
    stand_in = types.SimpleNamespace(active=types.SimpleNamespace(get_current_stream=lambda dev: 7,
                                                                  get_current_device=lambda: 0))
    monkeypatch.setattr(tritonlaunch, "driver", stand_in)
    monkeypatch.setattr(tritoncall, "driver", stand_in)
    fired = []
    r = Replay(_stand_in_kernel)

    def keep(args, kwargs):   # what _record would keep for this signature
        r.entries[r.signature(args, kwargs)] = _Entry("compiled", lambda a, s: fired.append((list(a), s)), ())
    return r, keep, fired


def test_replayed_launch_hands_its_arguments_to_the_launcher(direct):
    r, keep, fired = direct
    x, y = torch.empty(64, 64), torch.empty(64, 64)
    keep((x, descriptor(x, [16, 16]), 64, 2.0), {"BLOCK": 16})
    before = dict(tritonlaunch.counts)
    d = descriptor(y, [16, 16])
    assert r[(1,)](y, d, 64, 3.5, BLOCK=16) == "compiled"
    assert fired == [([y, d, 64, 3.5], 7)] and tritonlaunch.counts["replayed"] == before["replayed"] + 1


def test_recipe_fills_in_new_operands_and_keeps_the_rest(direct):
    from study.tritoncall import fire_recipe, record_call

    r, keep, fired = direct
    a, b, c = torch.empty(32, 32), torch.empty(32, 32).t(), torch.empty(32, 32)   # b: NT's view
    own = torch.zeros(8)   # a buffer of the stage's own (s14's workspace)
    keep((a, descriptor(b, [16, 16], True), c, own, 32, 1.5), {"BLOCK": 16})
    stage = lambda a, b, c: r[(4,)](a, descriptor(b, [16, 16], True), c, own, 32, 1.5, BLOCK=16)  # noqa: E731
    rc = record_call(lambda: stage(a, b, c), (a, b, c))
    assert rc and rc.template[:3] == [None, None, None], "the recorded operands must not be kept"
    a2, b2, c2 = torch.empty(32, 32), torch.empty(32, 32).t(), torch.empty(32, 32)
    fired.clear()
    assert fire_recipe(rc, (a2, b2, c2))
    (args, stream), = fired
    assert args[0] is a2 and args[2] is c2 and args[3] is own and args[4:] == [32, 1.5] and stream == 7
    assert args[1].base is b2 and tuple(args[1].strides) == (32, 1) and args[1].block_shape == [16, 16]
    tritonlaunch.forget()   # a dropped launch: the recipe steps aside
    assert not fire_recipe(rc, (a2, b2, c2))


def test_recipe_refuses_views_and_other_threads_launches(direct):
    import threading

    from study.tritoncall import record_call

    r, keep, fired = direct
    a, b, c = (torch.empty(32, 32) for _ in range(3))
    keep((a.t(), c, 32, 1.5), {"BLOCK": 16})
    assert record_call(lambda: r[(1,)](a.t(), c, 32, 1.5, BLOCK=16), (a, b, c)) is False   # a view of a
    keep((a, c, 32, 1.5), {"BLOCK": 16})
    fired.clear()
    other = threading.Thread(target=lambda: r[(1,)](a, c, 32, 1.5, BLOCK=16))
    rc = record_call(lambda: (other.start(), other.join(), r[(1,)](a, c, 32, 1.5, BLOCK=16)), (a, b, c))
    assert rc and len(fired) == 2   # the other thread's launch ran but is not in the recipe


class builtin_function_or_method:   # noqa: N801 -- stands in for Triton's C launcher (the name is what
    """Records each launch's arguments."""   # tritonfire.launcher checks before calling it raw)

    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)


def _fake_compiled(raw, scratch, meta=None):
    """A compiled kernel as launcher reads it: Triton 3.6's CudaLauncher over C launcher `raw`
    (meta: the descriptor's encoding metadata; None, the base tensor is passed unencoded)."""
    from triton.backends.nvidia.driver import CudaLauncher, wrap_handle_tensordesc

    signature = {0: "tensordesc<fp16[64, 64]>", 1: "*fp16", 2: "i32", 3: "fp32", 4: "constexpr"}
    run = object.__new__(CudaLauncher)
    run.launch = wrap_handle_tensordesc(raw, signature, meta)
    run.num_ctas, run.launch_cooperative_grid, run.launch_pdl = 1, False, False
    run.global_scratch_size, run.global_scratch_align = scratch, 16
    run.profile_scratch_size, run.profile_scratch_align = 0, 1
    return types.SimpleNamespace(run=run, function=0xF00, packed_metadata=("meta",))


@pytest.mark.parametrize("scratch", [0, 128])
def test_raw_launch_passes_what_tritons_launcher_passes(scratch):
    """launcher's direct call of the C launcher gets, argument for argument, what Triton 3.6's
    CudaLauncher and its descriptor wrapper hand it (descriptors expanded, global scratch sized
    by the grid), a tensor as its address (the C launcher reads a tensor's data_ptr())."""
    from study.tritonfire import launcher

    raw = builtin_function_or_method()
    c = _fake_compiled(raw, scratch)
    x = torch.empty(64, 64, dtype=torch.float16)
    args, rest = (descriptor(x, [64, 64]), x, 64, 1.5), (128,)
    token = tritonfire._allocation._allocator.set(lambda size, align, stream: ("scratch", size, align, stream))
    try:
        launcher(c, (3, 2, 1), len(args), rest, (1,))(args, 7)
        c.run(3, 2, 1, 7, 0xF00, ("meta",), None, None, None, *args, *rest)   # Triton's own last step
    finally:
        tritonfire._allocation._allocator.reset(token)
    ours, tritons = raw.calls
    assert len(ours) == len(tritons)
    for p, q in zip(ours, tritons):
        assert p is q or (p == q.data_ptr() if isinstance(q, torch.Tensor) else p == q), (p, q)
    assert ours[7] == (("scratch", 128 * 6, 16, 7) if scratch else None)


def test_raw_launch_takes_the_stages_scratch_from_the_caching_allocator(monkeypatch):
    """With the stages' own allocator set, a replayed launch's global scratch is a bare block of
    torch's caching allocator, on the launch's stream, freed once the launch is queued."""
    from study.tritonfire import launcher

    log = []
    monkeypatch.setattr(tritonfire, "_raw_alloc", lambda size, stream: log.append(("alloc", size, stream)) or 0xA000)
    monkeypatch.setattr(tritonfire, "_raw_delete", lambda ptr: log.append(("free", ptr)))
    raw = builtin_function_or_method()
    c = _fake_compiled(raw, 256)
    x = torch.empty(64, 64, dtype=torch.float16)
    token = tritonfire._allocation._allocator.set(tritonfire.scratch)
    try:
        launcher(c, (4, 1, 1), 4, (128,), (1,))((descriptor(x, [64, 64]), x, 64, 1.5), 9)
    finally:
        tritonfire._allocation._allocator.reset(token)
    (call,) = raw.calls
    assert call[7] == 0xA000 and log == [("alloc", 256 * 4, 9), ("free", 0xA000)]


def test_entry_holds_only_while_its_autotuner_keeps_the_config():
    from study.tritonlaunch import _Entry

    cfg, cfgs = object(), [object(), object()]
    at = types.SimpleNamespace(configs=cfgs, cache={("key",): cfg})
    e = _Entry("compiled", None, ((at, ("key",), cfg, cfgs),))
    assert e.tuners_hold()
    at.cache.clear()                      # reset (the per-config GPU test does it)
    assert not e.tuners_hold()
    at.cache[("key",)] = cfg
    at.configs = cfgs[:1]                 # another config list (a test trims it)
    assert not e.tuners_hold()


def test_expanded_recipe_launches_what_the_general_recipe_does(monkeypatch, device0):
    """A recipe in the C launcher's form (addresses filled in, encodings kept per address) hands
    the launcher exactly what the general recipe's fire does, for each new operand address."""
    from study import tritoncall
    from study.tritoncall import Recipe, fire_recipe, record_call
    from study.tritonfire import launcher
    from study.tritonlaunch import _Entry

    def encode(d, meta):   # stands in for make_tensordesc_arg's CUtensorMap (needs a GPU)
        return [("map", d.base.data_ptr(), tuple(d.shape), tuple(d.strides), tuple(d.block_shape), meta["id"]),
                *d.shape, *d.strides]
    monkeypatch.setattr(tritonfire, "make_tensordesc_arg", encode)
    monkeypatch.setattr(tritoncall, "make_tensordesc_arg", encode)
    monkeypatch.setattr(tritonlaunch, "_direct_ok", lambda: True)
    stand_in = types.SimpleNamespace(active=types.SimpleNamespace(get_current_stream=lambda dev: 7))
    monkeypatch.setattr(tritonlaunch, "driver", stand_in)
    monkeypatch.setattr(tritoncall, "driver", stand_in)
    raw = builtin_function_or_method()
    fire = launcher(_fake_compiled(raw, 0, [{"id": 3}]), (2, 1, 1), 4, (16,), (1,))
    r = Replay(_stand_in_kernel)

    def stage(a, b, c):
        return r[(2,)](descriptor(b, [16, 16], True), a, 32, 1.5, BLOCK=16)
    a, b, c = torch.empty(32, 32, dtype=torch.float16), torch.empty(32, 32, dtype=torch.float16).t(), torch.empty(4)
    r.entries[r.signature((descriptor(b, [16, 16], True), a, 32, 1.5), {"BLOCK": 16})] = _Entry("compiled", fire, ())
    rc = record_call(lambda: stage(a, b, c), (a, b, c))
    assert rc and rc.expanded is not None
    general = Recipe(rc.device, rc.entry, rc.template, rc.slots, rc.descs)   # expanded None: the general form
    for _ in range(2):   # a new address for b, then the same again (its encoding kept)
        a2, b2 = torch.empty(32, 32, dtype=torch.float16), torch.empty(32, 32, dtype=torch.float16).t()
        raw.calls.clear()
        assert fire_recipe(rc, (a2, b2, c)) and fire_recipe(general, (a2, b2, c))
        ours, theirs = raw.calls
        assert ours == theirs and ours[13] == ("map", b2.data_ptr(), (32, 32), (32, 1), (16, 16), 3)
        assert ours[13 + 5] == a2.data_ptr()


def test_a_kept_launch_replays_only_its_own_tuple_grid(direct, monkeypatch):
    """A forced plan (s14's launch(..., p)) may ask for another grid under the same signature:
    that call goes to Triton, and is kept in place of the old launch."""
    r, keep, fired = direct
    x = torch.empty(64, 64)
    args = (x, descriptor(x, [16, 16]), 64, 2.0)
    r.entries[r.signature(args, {"BLOCK": 16})] = tritonlaunch._Entry(
        "compiled", lambda a, s: fired.append((list(a), s)), (), (4,))
    recorded = []
    monkeypatch.setattr(r, "_record", lambda key, grid, a, k: recorded.append(grid) or "triton")
    assert r[(4,)](*args, BLOCK=16) == "compiled" and len(fired) == 1
    assert r[(5,)](*args, BLOCK=16) == "triton" and recorded == [(5,)] and len(fired) == 1
    r.entries[r.signature(args, {"BLOCK": 16})].grid = None   # kept from a callable grid: a function
    assert r[lambda meta: (6,)](*args, BLOCK=16) == "compiled"   # of the signature, never compared
