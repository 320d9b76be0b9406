"""compute-sanitizer reports into findings, through :func:`parse_sanitizer_output` and ``text()``.

The outputs below follow the published formats (NVIDIA's Compute Sanitizer manual and real logs quoted in
public issues, see the module's docstring); paths and addresses are changed, the shapes are not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness_tools.inspect.sanitizer_parse import parse_sanitizer_output
from harness_tools.inspect.sanitizer_report import MAX_FINDINGS, TEXT_CHARS

BANNER = "========= COMPUTE-SANITIZER\n"


def oob_record(tx: int = 232, bx: int = 3, line: int = 12) -> str:
    return (
        "========= Invalid __global__ read of size 4 bytes\n"
        f"=========     at transpose(const float *, float *, int)+0x1f0 in /tmp/cudaopt-8f2a/build/kernel.cu:{line}\n"
        f"=========     by thread ({tx},0,0) in block ({bx},0,0)\n"
        f"=========     Address 0x7c5838a{tx:05x} is out of bounds\n"
        "=========     and is 1 bytes after the nearest allocation at 0x7c5838a00000 of size 4,000 bytes\n"
        "=========     Saved host backtrace up to driver entry point at kernel launch time\n"
        "=========         Host Frame: launch_transpose(float const*, float*, int) in host.cu:88 [0x13cb4] in runner\n"
        "=========         Host Frame: main [0xc025] in runner\n"
        "=========\n"
    )


API_ERROR = (
    '========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" '
    "on CUDA API call to cudaDeviceSynchronize.\n"
    "=========     Saved host backtrace up to driver entry point at error\n"
    "=========         Host Frame: main in host.cu:31 [0x8a2d] in runner\n"
    "=========\n"
)


def test_out_of_bounds_read_gives_kernel_line_thread_block_size_and_address():
    out = BANNER + oob_record() + API_ERROR + "========= Target application returned an error\n========= ERROR SUMMARY: 2 errors\n"
    report = parse_sanitizer_output("memcheck", out, source_name="kernel.cu")

    oob, api = report.findings
    assert (oob.tool, oob.kind, oob.kernel, oob.file, oob.line) == ("memcheck", "invalid_global_read", "transpose", "kernel.cu", 12)
    assert (oob.thread, oob.block, oob.access_size, oob.count) == ((232, 0, 0), (3, 0, 0), 4, 1)
    assert oob.message == "Invalid __global__ read of size 4 bytes"
    assert oob.address.startswith("Address 0x7c5838a000e8 is out of bounds and is 1 bytes after the nearest allocation")
    assert api.kind == "cuda_api_error" and api.kernel is None and "cudaDeviceSynchronize" in api.message
    # The program's failure is the kernel's echo here, not a failed run.
    assert (report.summary_errors, report.clean, report.tool_error) == (2, False, None)
    text = report.text()
    assert "kernel.cu:12 in transpose: invalid_global_read 4B; e.g. thread (232,0,0) block (3,0,0)" in text
    assert "out of bounds: 1 bytes after a 4,000-byte allocation" in text
    assert "/tmp" not in text and len(text) <= TEXT_CHARS


@pytest.mark.parametrize("frame", [
    # compute-sanitizer 2022+ (the manual's samples): kernel+offset in file:line on one line
    "=========     at transpose(const float *, float *, int)+0x1f0 in /home/u/run/kernel.cu:12\n",
    # CUDA 12.x logs with long names: the file wrapped onto its own line
    "=========     at transpose(const float *, float *, int)+0x1f0\n=========        in /home/u/run/kernel.cu:12\n",
    # CUDA 11 / cuda-memcheck: pc in file:line:signature, size without 'bytes', a device frame
    "=========     at 0x000001f0 in /home/u/run/kernel.cu:12:void transpose(float const *, float*, int)\n"
    "=========     Device Frame:/home/u/run/kernel.cu:12:void transpose(float const *, float*, int) (void transpose : 0x1f0)\n",
])
def test_location_variants_give_the_same_kernel_and_line(frame):
    out = BANNER + "========= Invalid __global__ write of size 8\n" + frame + \
        "=========     by thread (1,2,0) in block (0,1,0)\n=========     Address 0x7f00 is out of bounds\n=========\n" \
        "========= ERROR SUMMARY: 1 error\n"
    (f,) = parse_sanitizer_output("memcheck", out, "kernel.cu").findings
    assert (f.kind, f.kernel, f.file, f.line, f.access_size) == ("invalid_global_write", "transpose", "kernel.cu", 12, 8)
    assert (f.thread, f.block) == ((1, 2, 0), (0, 1, 0))


def test_without_lineinfo_the_kernel_is_named_but_no_line_is_invented():
    out = BANNER + ("========= Invalid __shared__ read of size 16 bytes\n"
                    "=========     at reduce(const float *, float *, int)+0x4a0\n"
                    "=========     by thread (0,0,0) in block (687,0,0)\n"
                    "=========     Address 0x8 is misaligned\n=========\n========= ERROR SUMMARY: 1 error\n")
    (f,) = parse_sanitizer_output("memcheck", out, "kernel.cu").findings
    assert (f.kind, f.kernel, f.file, f.line) == ("misaligned_shared_read", "reduce", None, None)


def test_misaligned_write_from_the_manual():
    out = BANNER + ("========= Invalid __global__ write of size 4 bytes\n"
                    "=========     at unaligned_kernel():0x160 in memcheck_demo.cu:6\n"
                    "=========     by thread (0,0,0) in block (0,0,0)\n"
                    "=========     Address 0x7f6510c00001 is misaligned\n=========\n========= ERROR SUMMARY: 1 error\n")
    (f,) = parse_sanitizer_output("memcheck", out).findings
    assert (f.kind, f.kernel, f.file, f.line) == ("misaligned_global_write", "unaligned_kernel", "memcheck_demo.cu", 6)
    assert f.address == "Address 0x7f6510c00001 is misaligned"


@pytest.mark.parametrize("race", [
    # analysis report, one line per access (the manual)
    "========= Error: Race reported between Write access at sumKernel(int *, int *)+0xf0 in /w/kernel.cu:40\n"
    "=========     and Read access at sumKernel(int *, int *)+0x280 in /w/kernel.cu:46 [4 hazards]\n=========\n",
    # the same, as newer releases wrap it
    "========= Error: Race reported between Write access at\n=========     sumKernel(int *, int *)+0xf0 in /w/kernel.cu:40\n"
    "=========     and Read access at\n=========     sumKernel(int *, int *)+0x280 in /w/kernel.cu:46\n"
    "=========     [4 hazards]\n=========\n",
])
def test_racecheck_hazard_between_a_write_and_a_read(race):
    out = BANNER + race + "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"
    report = parse_sanitizer_output("racecheck", out, "kernel.cu")
    (f,) = report.findings
    assert (f.kind, f.severity, f.kernel, f.file, f.line) == ("race_read_after_write", "error", "sumKernel", "kernel.cu", 40)
    assert f.peers == ["Read at kernel.cu:46 [4 hazards]"]
    assert "/w/" not in f.message
    assert (report.summary_errors, report.summary_warnings, report.clean) == (1, 0, False)
    assert "kernel.cu:40 in sumKernel: race_read_after_write" in report.text() and "vs Read at kernel.cu:46" in report.text()


def test_racecheck_hazard_reports_are_folded_per_line():
    byte = ("========= Warning: (Warp Level Programming) Potential RAW hazard detected at __shared__ 0x{:x} in block (0,0,0) :\n"
            "=========     Write Thread (35,0,0) at sumKernel(int *, int *)+0x90 in kernel.cu:44\n"
            "=========     Read Thread (32,0,0) at sumKernel(int *, int *)+0x120 in kernel.cu:56\n"
            "=========     Current Value : 35\n=========\n")
    out = BANNER + "".join(byte.format(a) for a in range(0x8c, 0x90)) + \
        "========= RACECHECK SUMMARY: 4 hazards displayed (0 errors, 4 warnings)\n"
    report = parse_sanitizer_output("racecheck", out, "kernel.cu")
    (f,) = report.findings
    assert (f.kind, f.severity, f.line, f.count) == ("race_read_after_write", "warning", 44, 4)
    assert (f.thread, f.block) == ((35, 0, 0), (0, 0, 0))
    assert f.peers == ["Read at kernel.cu:56"] and f.address == "__shared__ 0x8c"
    assert (report.summary_errors, report.summary_warnings, report.clean) == (0, 4, False)


def test_racecheck_summary_wrapped_onto_two_lines_and_long_names_kept_short():
    functor = "Kokkos::Impl::CudaReductionsFunctor<Sum,void,bool=0,bool=0>"  # an older release's report (kokkos#4855)
    out = BANNER + (f"========= WARNING: Race reported between Read access at 0xf10 in /src/Adapter.hpp:1571:{functor}"
                    "::scalar_intra_warp_reduction(Sum const &,double*,bool,int)\n"
                    f"=========     and Write access at 0x8a0 in /src/ReduceScan.hpp:557:{functor}"
                    "::scalar_intra_block_reduction(Sum const &,double,bool,double*,int,double*) [3968 hazards]\n=========\n"
                    "========= RACECHECK SUMMARY: 100 hazards displayed\n========= (4528176 errors, 661824 warnings)\n")
    report = parse_sanitizer_output("racecheck", out, "kernel.cu")
    (f,) = report.findings
    assert (f.kind, f.severity, f.file, f.line) == ("race_write_after_read", "warning", "Adapter.hpp", 1571)
    assert f.kernel == functor + "::scalar_intra_warp_reduction"
    assert f.peers == ["Write at ReduceScan.hpp:557 [3968 hazards]"]
    assert (report.summary_errors, report.summary_warnings) == (4528176, 661824)
    assert "CudaReductionsFunctor::scalar_intra_warp_reduction: race_write_after_read (warning)" in report.text()


def test_initcheck_uninitialised_global_read():
    out = BANNER + ("========= Uninitialized __global__ memory read of size 4 bytes\n"
                    "=========     at vectorAdd(int *)+0x70 in /home/cuda/samples/kernel.cu:41\n"
                    "=========     by thread (31,0,0) in block (1,0,0)\n"
                    "=========     Address 0x7f3c7ec000fc\n=========\n========= ERROR SUMMARY: 1 error\n")
    (f,) = parse_sanitizer_output("initcheck", out, "kernel.cu").findings
    assert (f.kind, f.kernel, f.file, f.line, f.access_size) == ("uninitialized_global_read", "vectorAdd", "kernel.cu", 41, 4)
    assert (f.thread, f.block, f.address) == ((31, 0, 0), (1, 0, 0), "Address 0x7f3c7ec000fc")


@pytest.mark.parametrize("headline, kind", [
    ("Barrier error detected. Divergent thread(s) in block.", "barrier_divergence"),  # CUDA 12.x logs end with '.'
    ("Barrier error detected. Divergent thread(s) in warp", "warp_barrier_divergence"),  # the manual
    ("Barrier error detected. Invalid arguments", "barrier_invalid_arguments"),
])
def test_synccheck_barrier_errors(headline, kind):
    out = BANNER + f"========= {headline}\n" + ("=========     at ThreadDivergence(int *, int)+0xf0 in kernel.cu:79\n"
                                                "=========     by thread (37,0,0) in block (0,0,0)\n=========\n"
                                                "========= ERROR SUMMARY: 1 error\n")
    report = parse_sanitizer_output("synccheck", out, "kernel.cu")
    (f,) = report.findings
    assert (f.kind, f.kernel, f.line, f.thread, f.message) == (kind, "ThreadDivergence", 79, (37, 0, 0), headline)


@pytest.mark.parametrize("tool, summary", [
    ("memcheck", "========= ERROR SUMMARY: 0 errors\n"),
    ("racecheck", "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"),
])
def test_clean_run(tool, summary):
    program = "max_abs_err = 0 -> PASS\nstep 3 ========= done\n"  # the program's own lines, one with a prefix-like run
    report = parse_sanitizer_output(tool, BANNER + program + summary, "kernel.cu")
    assert (report.clean, report.findings, report.summary_errors, report.tool_error) == (True, [], 0, None)
    assert report.text().startswith(f"compute-sanitizer {tool}: clean")


def test_five_thousand_identical_reports_fold_into_one_finding():
    out = BANNER + "".join(oob_record(tx % 256, tx // 256) for tx in range(5000)) + "========= ERROR SUMMARY: 5000 errors\n"
    report = parse_sanitizer_output("memcheck", out, "kernel.cu")
    (f,) = report.findings
    assert (f.count, f.thread, f.line, report.omitted, report.summary_errors) == (5000, (0, 0, 0), 12, 0, 5000)
    assert "invalid_global_read 4B x5000" in report.text() and len(report.text()) <= TEXT_CHARS


def test_more_distinct_findings_than_kept_are_counted_and_text_stays_short():
    out = BANNER + "".join(oob_record(line=n) for n in range(1, 31)) + "========= ERROR SUMMARY: 30 errors\n"
    report = parse_sanitizer_output("memcheck", out, "kernel.cu")
    assert (len(report.findings), report.omitted) == (MAX_FINDINGS, 30 - MAX_FINDINGS)
    assert len(report.text()) <= TEXT_CHARS and "more distinct finding(s) not shown" in report.text()


@pytest.mark.parametrize("out, says", [
    ("bash: line 1: compute-sanitizer: command not found\n", "not available"),
    (BANNER + "========= Error: Target application terminated before first instrumented API call\n"
     "========= Tracking kernels launched by child processes requires the --target-processes all option.\n"
     "========= Error: No attachable process found. compute-sanitizer timed-out.\n"
     "========= Default timeout can be adjusted with --launch-timeout. Awaiting target completion.\n", "No attachable process"),
    (BANNER + "========= Internal Sanitizer Error: The Sanitizer encountered an error while launching transpose and didn't "
     "track the launch. Errors might go undetected. (Unable to allocate enough memory to perform the requested operation)\n"
     "========= ERROR SUMMARY: 0 errors\n", "Internal Sanitizer Error"),
    (BANNER + "Traceback (most recent call last):\n  File \"/tmp/run.py\", line 9, in <module>\n    load(args)\n"
     "FileNotFoundError: [Errno 2] inputs.bin\n========= Error: process didn't terminate successfully\n"
     "========= Target application returned an error\n========= ERROR SUMMARY: 0 errors\n", "FileNotFoundError"),
    ("", "no compute-sanitizer summary"),
])
def test_a_failed_run_is_a_tool_error_not_a_finding(out, says):
    report = parse_sanitizer_output("memcheck", out, "kernel.cu")
    assert report.findings == [] and not report.clean
    assert says in report.tool_error and "the run failed" in report.text()


def test_noise_crlf_and_a_cut_off_end_are_tolerated():
    out = ("loading inputs...\n" + BANNER + oob_record(tx=7)
           + "[runner] case 3/8 max_abs_err=nan\n"                      # the program's own line between records
           + "========= Invalid __global__ read of size 4 bytes\n"
           + "=========     at transpose(const float *, float *, int)+0x1f0 in /tmp/x/kernel.cu:12\n"
           + "progress 40%\n"                                          # and inside one
           + "=========     by thread (8,0,0) in block (0,0,0)\n"
           + "=========     Address 0x7c58").replace("\n", "\r\n")        # cut off mid-line, no summary
    report = parse_sanitizer_output("memcheck", out, "kernel.cu")
    (f,) = report.findings
    assert (f.count, f.line, f.thread) == (2, 12, (7, 0, 0))
    assert (report.summary_errors, report.clean, report.tool_error) == (None, False, None)
    assert "no summary line" in report.text()


def test_leaks_and_an_unknown_headline_are_kept():
    out = BANNER + ("========= Leaked 64 bytes at 0x400200200\n"
                    "=========     Saved host backtrace up to driver entry point\n=========\n"
                    "========= Leaked 16 bytes at 0x400300000\n=========\n"
                    "========= Some future error class\n=========     at transpose(float *)+0x10 in kernel.cu:3\n=========\n"
                    "========= LEAK SUMMARY: 80 bytes leaked in 2 allocations\n========= ERROR SUMMARY: 3 errors\n")
    report = parse_sanitizer_output("memcheck", out, "kernel.cu")
    other, leak = report.findings
    assert (other.kind, other.line, leak.kind, leak.count) == ("other", 3, "leak", 2)


def test_unknown_tool_is_refused():
    with pytest.raises(ValueError):
        parse_sanitizer_output("leakcheck", "")


# ---- real output of compute-sanitizer 2025.3.1 (CUDA 13) on the H200, captured by the gpu tests ----------
H200 = Path(__file__).parents[2] / "fixtures" / "sanitizer"


def test_h200_memcheck_out_of_bounds_read_with_line_and_launch_failure():
    report = parse_sanitizer_output("memcheck", (H200 / "memcheck_oob_read_h200.log").read_text(), source_name="kernel.cu")
    first = report.findings[0]
    assert (first.kind, first.kernel, first.file, first.line, first.access_size) == (
        "invalid_global_read", "transpose", "kernel.cu", 4, 4)
    assert first.block == (2, 2, 0) and "out of bounds" in first.address
    assert report.summary_errors == 2146 and not report.clean and report.tool_error is None
    assert "kernel.cu:4 in transpose: invalid_global_read 4B" in report.text()


def test_h200_racecheck_hazards_name_the_write_and_read_lines():
    report = parse_sanitizer_output("racecheck", (H200 / "racecheck_missing_barrier_h200.log").read_text(),
                                    source_name="kernel.cu")
    assert report.findings and all(f.line == 7 and f.kernel == "transpose" for f in report.findings)
    assert any("kernel.cu:11" in p for f in report.findings for p in f.peers)
    assert report.summary_errors == 4 and not report.clean


@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "initcheck", "synccheck"])
def test_h200_clean_runs(tool):
    report = parse_sanitizer_output(tool, (H200 / f"{tool}_clean_h200.log").read_text(), source_name="kernel.cu")
    assert report.clean and not report.findings and report.tool_error is None, report.text()
