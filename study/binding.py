"""The C++ binding of a CUDA stage, generated from its header: no torch headers.

The stage's `.cu` stays pure CUDA (torch headers cost ~35 s of nvcc each). The binding
includes only pybind11 and common/gemm.cuh, takes raw pointers as integers, and calls the
stage's `unsupported()` and `launch()` for each precision its header's Dtype names (and
`num_configs()` / `config_name()` / `launch(p, stream, config)` for an autotuned stage).
A scaled precision (fp8) gets `gemm::ScaledProblem<OutT>` launchers, OutT the header's output
type, taking the scale pointers and the per-row / per-column flags after `layout`.

`int layout` (gemm::Layout: 0 NN, 1 NT, 2 TN) follows beta in every launcher. A layout the
header's Layout line does not list is refused by check_<prec> (its reason, before the stage's
unsupported() runs) and by launch_<prec> (std::invalid_argument), so a stage sees only the
layouts it lists and a one-layout stage can ignore p.layout. ScaledProblem has no layout member:
fp8 stages list NT only.
"""
from __future__ import annotations

import re

from .registry import LAYOUTS, SCALED, Stage

# Element type of each precision in the launcher signature (fp8: of A and B; C is the output's).
CTYPE = {"fp32": "float", "tf32": "float", "fp16": "__half", "bf16": "__nv_bfloat16", "fp8": "__nv_fp8_e4m3"}
_ARGS = ("std::uintptr_t a, std::uintptr_t b, std::uintptr_t c, int M, int N, int K, "
         "int lda, int ldb, int ldc, double alpha, double beta, int layout")
_SCALE_ARGS = ", std::uintptr_t scale_a, std::uintptr_t scale_b, int scale_a_per_row, int scale_b_per_col"
_HAS_CONFIGS = re.compile(r"\bint\s+num_configs\s*\(\s*\)")
_HAS_DECOMPOSITION = re.compile(r"\bconst\s+char\s*\*\s*decomposition\s*\(")


def has_configs(stage: Stage) -> bool:
    """True if the stage exposes num_configs()/config_name()/launch(p, stream, config)."""
    return bool(_HAS_CONFIGS.search(stage.path.read_text()))


def problem_type(stage: Stage, prec: str) -> str:
    """The C++ problem type of one precision: gemm::Problem<T>, or gemm::ScaledProblem<OutT>."""
    if prec in SCALED:
        return f"gemm::ScaledProblem<{CTYPE[stage.out]}>"
    return f"gemm::Problem<{CTYPE[prec]}>"


def _make(stage: Stage, prec: str) -> str:
    """The statement building the problem `p` from the launcher's arguments."""
    t, ptype = CTYPE[prec], problem_type(stage, prec)
    out = CTYPE[stage.out] if prec in SCALED else t
    fields = (f"reinterpret_cast<const {t}*>(a), reinterpret_cast<const {t}*>(b), reinterpret_cast<{out}*>(c), "
              "M, N, K, lda, ldb, ldc, float(alpha), float(beta)")
    if prec in SCALED:
        fields += (", reinterpret_cast<const float*>(scale_a), reinterpret_cast<const float*>(scale_b), "
                   "scale_a_per_row, scale_b_per_col")
    else:
        fields += ", static_cast<gemm::Layout>(layout)"
    return f"{ptype} p{{{fields}}};"


def _layout_refusal(stage: Stage) -> str:
    """The C++ helper returning why a layout value is refused ("" for one the header lists)."""
    listed = " || ".join(f"layout == {LAYOUTS.index(x)}" for x in stage.layouts)
    names = ", ".join(f'"{x}"' for x in LAYOUTS)
    return (f"// the layouts the header lists: {', '.join(stage.layouts)}\n"
            f"static std::string layout_refusal(int layout) {{\n"
            f"  if ({listed}) return std::string();\n"
            f"  static const char* names[] = {{{names}}};\n"
            f"  std::string name = layout >= 0 && layout < {len(LAYOUTS)} ? names[layout] : std::to_string(layout);\n"
            f"  return \"layout \" + name + \" is not supported: this stage takes {', '.join(stage.layouts)} \"\n"
            f"         \"(its header's Layout line)\";\n}}\n")


def has_decomposition(stage: Stage) -> bool:
    """True if the stage names how it divides a problem: `const char* decomposition(p)` per
    problem type (s14: split-K, stream-K, ...), bound as decomposition_<prec>(args) -> str."""
    return bool(_HAS_DECOMPOSITION.search(stage.path.read_text()))


def binding_source(stage: Stage) -> str:
    """The generated C++ binding: pybind11 + the stage's declarations, no torch headers."""
    ns = stage.stem
    configs, decomposes = has_configs(stage), has_decomposition(stage)
    decls, funcs, defs = [], [_layout_refusal(stage)], []
    for prec in stage.precisions:
        ptype = problem_type(stage, prec)
        if f"{ptype}&" not in "".join(decls):
            decls.append(f"const char* unsupported(const {ptype}& p);")
            decls.append(f"cudaError_t launch(const {ptype}& p, cudaStream_t stream);")
            if configs:
                decls.append(f"cudaError_t launch(const {ptype}& p, cudaStream_t stream, int config);")
            if decomposes:
                decls.append(f"const char* decomposition(const {ptype}& p);")
        args = _ARGS + (_SCALE_ARGS if prec in SCALED else "")
        make = _make(stage, prec)
        funcs.append(
            f"static std::string check_{prec}({args}) {{\n"
            f"  std::string refused = layout_refusal(layout);\n  if (!refused.empty()) return refused;\n  {make}\n"
            f"  const char* why = {ns}::unsupported(p);\n  return why ? std::string(why) : std::string();\n}}\n"
            f"static void launch_{prec}({args}, std::uintptr_t stream, int config) {{\n"
            f"  std::string refused = layout_refusal(layout);\n"
            f"  if (!refused.empty()) throw std::invalid_argument(\"{ns}: \" + refused);\n  {make}\n"
            f"  // a launcher ends with cudaGetLastError(): clear first what an earlier runtime call of this\n"
            f"  // thread left (a sticky error stays and is reported again), so the result is this launch's\n"
            f"  const cudaError_t stale = cudaGetLastError();\n"
            f"  cudaError_t err = config < 0 ? {ns}::launch(p, reinterpret_cast<cudaStream_t>(stream))\n"
            + (f"                             : {ns}::launch(p, reinterpret_cast<cudaStream_t>(stream), config);\n"
               if configs else "                             : cudaErrorInvalidValue;\n")
            + f"  if (err != cudaSuccess)\n    throw std::runtime_error(std::string(\"{ns} launch: \") + cudaGetErrorString(err) +\n"
            f"                             (stale != cudaSuccess ? std::string(\" (an earlier CUDA call in this thread had left: \") +\n"
            f"                                                     cudaGetErrorString(stale) + \")\" : std::string()));\n}}\n")
        if decomposes:
            funcs.append(f"static std::string decomposition_{prec}({args}) {{\n  {make}\n"
                         f"  return std::string({ns}::decomposition(p));\n}}\n")
            defs.append(f'  m.def("decomposition_{prec}", &decomposition_{prec});')
        defs.append(f'  m.def("check_{prec}", &check_{prec});')
        defs.append(f'  m.def("launch_{prec}", &launch_{prec});')
    if configs:
        decls += ["int num_configs();", "const char* config_name(int i);"]
        funcs.append(f"static std::vector<std::string> configs() {{\n  std::vector<std::string> out;\n"
                     f"  for (int i = 0; i < {ns}::num_configs(); ++i) out.push_back({ns}::config_name(i));\n"
                     f"  return out;\n}}\n")
        defs.append('  m.def("configs", &configs);')
    return "\n".join([
        "// Generated by study/binding.py from the stage header: do not edit.",
        "#include <pybind11/pybind11.h>", "#include <pybind11/stl.h>",
        "#include <cstdint>", "#include <stdexcept>", "#include <string>", "#include <vector>",
        '#include "common/gemm.cuh"',
        f"namespace {ns} {{", *decls, "}", "", *funcs,
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {", *defs, "}", "",
    ])
