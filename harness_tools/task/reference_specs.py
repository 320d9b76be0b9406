"""The reference a task's outputs are checked against, as its spec states it: a NumPy or torch function in the task
folder (float64), a CUDA kernel run by the same engine, or stored expected outputs. Part of
:mod:`harness_tools.task.spec`, which re-exports these names."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from harness_tools.task.launches import LaunchSpec
from harness_tools.task.spec_fields import MAX_DEFINES, DefineName, Expr, FileName, Strict, _identifier


class NumpyReference(Strict):
    kind: Literal["numpy"] = "numpy"
    file: FileName = "reference.py"
    function: Annotated[str, _identifier("function name")] = "reference"


class TorchReference(Strict):
    """Like a NumPy reference, with the inputs as float64 CPU torch tensors (needs ``cudaopt[torch]``)."""

    kind: Literal["torch"] = "torch"
    file: FileName = "reference.py"
    function: Annotated[str, _identifier("function name")] = "reference"


class KernelReference(Strict):
    kind: Literal["cuda"] = "cuda"
    source: FileName
    kernel: Annotated[str, _identifier("kernel name")]
    launch: LaunchSpec
    defines: dict[DefineName, Expr] = Field(default_factory=dict, max_length=MAX_DEFINES)


class StoredReference(Strict):
    """Fixed inputs and expected outputs: ``<dir>/<case>/<buffer>.npy`` for every buffer."""

    kind: Literal["stored"] = "stored"
    dir: FileName = "expected"


Reference = Annotated[NumpyReference | TorchReference | KernelReference | StoredReference, Field(discriminator="kind")]
