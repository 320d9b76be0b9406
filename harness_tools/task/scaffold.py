"""A new task folder from a kernel file: its signature read from the source, a task.json to finish, a reference stub.

``cudaopt new DIR --kernel FILE.cu`` writes what can be known from the kernel (its name and typed parameters:
pointers become buffers, `const` ones inputs, the others outputs; integer scalars become size symbols) and
starter cases at the sizes where kernels break (1, around warp and block multiples, a prime), so the folder loads
at once. What only the author knows is left to fill in and said so: what the kernel computes (the description),
the buffers' shapes (the first size symbol by default), the reference (``reference.py`` fails with "write me"
until written), the tolerance and the performance sizes. ``cudaopt eval DIR`` then names what is still missing.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from harness_tools.errors import TaskSpecError
from harness_tools.task.dtypes import CTYPES, NARROW_FLOATS, is_float

# C spellings of the engine's dtypes, beyond CTYPES' own
_ALIASES = {"half": "float16", "__half": "float16", "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16",
            "__nv_fp8_e4m3": "float8_e4m3", "__nv_fp8_e5m2": "float8_e5m2", "char": "int8", "signed char": "int8",
            "int8_t": "int8", "int16_t": "int16", "int32_t": "int32", "int64_t": "int64", "uint8_t": "uint8",
            "uint16_t": "uint16", "uint32_t": "uint32", "uint64_t": "uint64", "unsigned": "uint32", "long": "int64",
            "long int": "int64", "unsigned long": "uint64", "size_t": "uint64", "long long int": "int64",
            "short int": "int16", "unsigned int": "uint32", "unsigned short": "uint16", "unsigned char": "uint8"}
C_DTYPES = {**{c: d for d, c in CTYPES.items()}, **_ALIASES}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct)\b")
# validation sizes where kernels break: one element, a warp's edges, a block's edges, a prime
STARTER_SIZES = [1, 31, 33, 255, 257, 1009]
REFERENCE_STUB = '''"""The float64 oracle of task {name}: what the kernel must compute, written independently of the kernel."""

import numpy as np


def reference(inputs, sizes):
    # inputs: every in/inout buffer as a float64 array (integers as int64), in its shape, and every scalar by name
    # sizes: the case's sizes, e.g. sizes["{size}"]
    # return every output by name, in its shape: {outputs}
    raise NotImplementedError("write me: reference.py must compute the outputs {outputs_list} in float64 "
                              "from inputs {inputs_list}")
'''


@dataclass
class KernelParam:
    name: str
    dtype: str
    pointer: bool
    const: bool


def kernel_signature(source: str, kernel: str | None = None) -> tuple[str, list[KernelParam]]:
    """(kernel name, its parameters) of the ``__global__`` function ``kernel`` (default: the only one) in ``source``."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    found = re.findall(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
                       r"([A-Za-z_]\w*)\s*\(([^)]*)\)", text)
    if not found:
        raise TaskSpecError("--kernel", "-", "no __global__ void kernel(...) found in the file")
    names = [name for name, _ in found]
    if kernel is None and len(set(names)) > 1:
        raise TaskSpecError("--kernel", "-", f"the file has several kernels ({', '.join(names)}): name one with --kernel-name")
    chosen = kernel or names[0]
    params_text = next((p for n, p in found if n == chosen), None)
    if params_text is None:
        raise TaskSpecError("--kernel", "-", f"no kernel {chosen!r} in the file (it has {', '.join(names)})")
    return chosen, [_param(p.strip(), chosen) for p in params_text.split(",") if p.strip() and p.strip() != "void"]


def _param(text: str, kernel: str) -> KernelParam:
    const = bool(re.search(r"\bconst\b", text.split("*")[0]))
    pointer = "*" in text or "[" in text
    words = _QUALIFIERS.sub(" ", text.replace("*", " ").replace("&", " ")).split()
    if len(words) < 2:
        raise TaskSpecError("--kernel", "-", f"kernel {kernel}: cannot read parameter {text!r} (type and name needed)")
    name, ctype = words[-1].split("[")[0], " ".join(words[:-1])
    dtype = C_DTYPES.get(ctype)
    if dtype is None:
        raise TaskSpecError("--kernel", "-", f"kernel {kernel}: parameter {name} has type {ctype!r}, which a task cannot "
                                             f"pass; use one of {', '.join(sorted(CTYPES.values()))}")
    return KernelParam(name=name, dtype=dtype, pointer=pointer, const=const)


def starter_spec(name: str, kernel: str, params: list[KernelParam], source_file: str) -> dict:
    """A task.json that loads: the kernel's parameters, starter cases, a numpy reference to write."""
    sizes = [p.name for p in params if not p.pointer and p.dtype.startswith(("int", "uint"))] or ["n"]
    first = sizes[0]
    spec_params = []
    for p in params:
        if p.pointer:
            spec_params.append({"kind": "buffer", "name": p.name, "dtype": p.dtype, "shape": [first],
                                "role": "in" if p.const else "out"})
        else:
            spec_params.append({"kind": "scalar", "name": p.name, "dtype": p.dtype,
                                "value": p.name if p.name in sizes else "1"})
    cases = [{"name": f"val_{v}", "role": "validation", "sizes": {s: v for s in sizes}} for v in STARTER_SIZES]
    cases.append({"name": "perf", "role": "performance", "sizes": {s: 1 << (20 // len(sizes)) for s in sizes}})
    out_dtypes = sorted({p.dtype for p in params if p.pointer and not p.const} - set(NARROW_FLOATS))
    return {
        "name": name,
        "description": f"TODO: what {kernel} computes, the layout of each buffer and the contract (a model reads this)",
        "kernel_name": kernel, "sizes": sizes, "params": spec_params, "cases": cases,
        "reference": {"kind": "numpy", "file": "reference.py", "function": "reference"},
        # half and fp8 outputs have defaults from their rounding; integers are exact
        "tolerance": {d: {"atol": 1e-5, "rtol": 1e-5} if is_float(d) else {"atol": 0, "rtol": 0} for d in out_dtypes},
        "baseline": {"source": source_file, "launch": {"grid": [f"ceil_div({first}, 256)"], "block": [256]}},
    }


def write_task_folder(folder: Path, kernel_file: Path, name: str | None = None, kernel: str | None = None,
                      schema: Path | None = None,
                      signature: tuple[str, list[KernelParam]] | None = None) -> list[str]:
    """Write the folder (refusing to overwrite one that holds a task.json); return what is left to do.
    ``signature``: the kernel and its parameters when the caller has read (and checked) them already."""
    if (folder / "task.json").exists():
        raise TaskSpecError(str(folder), "-", "already holds a task.json; choose a new folder")
    source = kernel_file.read_text()
    kernel, params = signature or kernel_signature(source, kernel)
    name = name or re.sub(r"[^A-Za-z0-9_-]", "_", folder.resolve().name)[:64]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / kernel_file.name).write_text(source)
    spec = starter_spec(name, kernel, params, kernel_file.name)
    if schema is not None:
        spec = {"$schema": os.path.relpath(schema, folder.resolve()), **spec}
    (folder / "task.json").write_text(json.dumps(spec, indent=2) + "\n")
    outputs = [p.name for p in params if p.pointer and not p.const]
    inputs = [p.name for p in params if p.const or not p.pointer]
    (folder / "reference.py").write_text(REFERENCE_STUB.format(
        name=name, size=spec["sizes"][0], outputs="{" + ", ".join(f"'{o}': ..." for o in outputs) + "}",
        outputs_list=outputs, inputs_list=inputs))
    return [f"describe what {kernel} computes ('description')",
            f"give each buffer its real shape (all are [{spec['sizes'][0]}] now) and role (non-const pointers are "
            f"outputs now: {', '.join(outputs) or 'none'}; make one 'inout' if the kernel reads it too)",
            "write reference.py (it raises 'write me' until then)",
            "set scalars that are not sizes (they are 1 now) and the launch grid/block of the baseline",
            "set the tolerance from the kernel's arithmetic and the performance case's sizes",
            f"then: cudaopt eval {folder}   (it names what is still wrong)"]
