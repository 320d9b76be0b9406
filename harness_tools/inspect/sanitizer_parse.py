"""Reading NVIDIA compute-sanitizer's text report into findings with source lines.

compute-sanitizer prefixes its lines with ``=========``: a record is a headline (one space after the
prefix), then indented details (``at ...``, ``by thread ...``, ``Address ...``, frames), then a bare prefix.
Other lines are the program's own output, skipped except those saying the run itself failed. It prints
one record per thread, so identical findings (same tool, kind, kernel and line) are folded and counted.

Every pattern below follows published output, never a guess; its comment names the source:
[manual] NVIDIA's Compute Sanitizer manual (CUDA 12/13), https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer;
[cuda11] older releases and cuda-memcheck, e.g. https://pastebin.com/AW9vmjFs, https://github.com/kokkos/kokkos/pull/4855;
[logs] real CUDA 12.x logs in public issues, e.g. https://github.com/NVIDIA/cccl/issues/1891 and /1902,
https://github.com/rapidsai/cudf/issues/15258, and captured logs in public repositories.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness_tools.inspect.sanitizer_report import (
    MAX_FINDINGS,
    TOOLS,
    SanitizerFinding,
    SanitizerReport,
    Triple,
)


def parse_sanitizer_output(tool: str, output: str, source_name: str | None = None) -> SanitizerReport:
    """Parse compute-sanitizer's combined output (noise, CRLF and truncation tolerated)."""
    tool = tool.strip().lower()
    if tool not in TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool {tool!r}; expected one of {', '.join(TOOLS)}")
    scan = _Scan()
    for raw in output.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        scan.feed(raw)
    scan.end_record()
    folded: dict[tuple, SanitizerFinding] = {}
    for record in scan.records:
        finding = _finding(tool, record, source_name)
        key = (finding.kind, finding.kernel, finding.file, finding.line,
               finding.message if finding.line is None and finding.kind == "cuda_api_error" else None)
        if (kept := folded.setdefault(key, finding)) is not finding:
            kept.count += 1
    # Device-side findings (with a kernel or a thread) first: host API errors are usually their echo.
    ordered = sorted(folded.values(), key=lambda f: 0 if (f.kernel or f.thread or f.line) else 1)
    errors, warnings = scan.summary(tool)
    if errors == 0 and not warnings:  # unknown headlines are errors only when the summary counts some
        ordered = [f for f in ordered if f.kind != "other"]
    tool_error = scan.tool_error(bool(ordered), errors)
    clean = errors == 0 and not warnings and not ordered and tool_error is None
    return SanitizerReport(tool=tool, findings=ordered[:MAX_FINDINGS], omitted=max(0, len(ordered) - MAX_FINDINGS),
                           summary_errors=errors, summary_warnings=warnings, clean=clean, tool_error=tool_error)


# --- the scan: sanitizer lines into records; summaries and failure lines on the side ---

_PREFIX = re.compile(r"(?<!=)={8,9}(?!=)( *)(.*)$")  # the default --prefix [manual]
# "ERROR SUMMARY: 1 error" [logs]; not its sequel "ERROR SUMMARY: 1946 errors were not printed. Use --print-limit
# ..." (compute-sanitizer 2025.3 on the H200)
_ERROR_SUMMARY = re.compile(r"^ERROR SUMMARY:\s*([\d,]+) errors?\b(?!\s+were not printed)")
# "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" [logs]; the parenthesis also seen on the next line [logs]
_RACE_SUMMARY = re.compile(r"^RACECHECK SUMMARY:\s*([\d,]+) hazards? displayed\s*"
                           r"(?:\(\s*([\d,]+) errors?,\s*([\d,]+) warnings?\s*\))?")
_RACE_SUMMARY_TAIL = re.compile(r"^\(\s*([\d,]+) errors?,\s*([\d,]+) warnings?\s*\)")
# the run failed: "Internal Sanitizer Error: ..." [manual]; "Error: No attachable process found. compute-sanitizer timed-out.",
# "Error: Target application terminated before first instrumented API call", "Target application returned an error",
# "Error: process didn't terminate successfully" [manual, logs]
_HARD_FAILURES = re.compile(r"^(Internal Sanitizer Error.*|Error: No attachable process found.*|"
                            r"Error: Target application terminated before first instrumented API call.*)")
_SOFT_FAILURES = re.compile(r"^(Target application returned an error|Error: process didn't terminate successfully|"
                            r"Error: couldn't find exit code)")
_OTHER_TOOL_ERROR = re.compile(r"^Error:\s*(?!.*\b(?:Race reported|hazard)\b)")
_META = re.compile(r"^(COMPUTE-SANITIZER|CUDA-MEMCHECK|LEAK SUMMARY|Tracking kernels launched|Default timeout|"
                   r"Awaiting target|(?:Warning|Note|Info)\s*:(?!.*\b(?:Race reported|hazard)\b))")
# the shell's and Python's words for a missing executable
_MISSING_TOOL = re.compile(r"compute-sanitizer: (?:command )?not found|No such file or directory: '[^']*compute-sanitizer'")
_PROGRAM_DEATH = re.compile(r"^(Segmentation fault|Aborted|Killed)\b")


@dataclass
class _Scan:
    records: list[list[str]] = field(default_factory=list)  # each: headline, then its detail lines
    errors: list[int] = field(default_factory=list)
    race: list[tuple[int, int] | None] = field(default_factory=list)  # (errors, warnings) of each RACECHECK SUMMARY
    hard: list[str] = field(default_factory=list)
    soft: list[str] = field(default_factory=list)
    current: list[str] | None = None
    in_traceback: bool = False

    def feed(self, raw: str) -> None:
        m = _PREFIX.search(raw) if "========" in raw else None
        if m is None:
            self._noise(raw)
            return
        indent, body = len(m[1]), m[2].strip()
        if raw[:m.start()].strip():  # after unflushed program text: only summaries and known headlines count
            indent = 1 if _ERROR_SUMMARY.match(body) or _RACE_SUMMARY.match(body) or _headline_kind(body) else -1
        if not body:
            self.end_record()
            return
        if s := _ERROR_SUMMARY.match(body):
            self.errors.append(_int(s[1]))
        elif s := _RACE_SUMMARY.match(body):
            self.race.append((_int(s[2]), _int(s[3])) if s[2] else None)
        elif self.race and self.race[-1] is None and (s := _RACE_SUMMARY_TAIL.match(body)):
            self.race[-1] = (_int(s[1]), _int(s[2]))
        elif _HARD_FAILURES.match(body):
            self.hard.append(body)
        elif _SOFT_FAILURES.match(body):
            self.soft.append(body)
        elif indent < 0:
            return
        elif _OTHER_TOOL_ERROR.match(body) and _headline_kind(body) is None:
            self.hard.append(body)
        elif _META.match(body) and _headline_kind(body) is None:
            pass
        elif indent > 1 or _DETAIL.match(body):
            if self.current is not None:  # a detail without its headline (output cut at the start) is dropped
                self.current.append(body)
            return
        else:  # a headline; an unknown one becomes an "other" finding rather than being lost
            self.end_record()
            self.current = [body]
            return
        self.end_record()

    def _noise(self, raw: str) -> None:
        line = raw.strip()
        if _MISSING_TOOL.search(line):
            self.hard.append("compute-sanitizer is not available: " + line[:200])
        elif line.startswith("Traceback (most recent call last)"):
            self.in_traceback = True
        elif self.in_traceback and line and not raw[:1].isspace():  # frames are indented, the exception line is not
            self.soft.append("the program raised " + line[:200])
            self.in_traceback = False
        elif _PROGRAM_DEATH.match(line):
            self.soft.append("the program died: " + line[:200])

    def end_record(self) -> None:
        if self.current is not None:
            self.records.append(self.current)
            self.current = None

    def summary(self, tool: str) -> tuple[int | None, int | None]:
        if tool == "racecheck" and (known := [r for r in self.race if r]):
            return sum(r[0] for r in known), sum(r[1] for r in known)
        return (sum(self.errors) if self.errors else None), None

    def tool_error(self, has_findings: bool, errors: int | None) -> str | None:
        if self.hard:
            return "; ".join(dict.fromkeys(self.hard))[:400]
        if not has_findings and self.soft:
            return "; ".join(dict.fromkeys(self.soft))[:400]
        if not has_findings and errors is None and not self.race:
            return "no compute-sanitizer summary in the output (the tool did not run, or its output was cut off)"
        return None


def _int(text: str) -> int:
    return int(text.replace(",", ""))


# --- one record into a finding ---

# Headlines. Memory access: "Invalid __global__ write of size 4 bytes" [manual], "... of size 8" [cuda11], "Potential invalid
# __shared__ read of size 4 bytes" (racecheck, clusters) [manual]. Initcheck: "Uninitialized __global__ memory read of size 4
# bytes" [manual]. Racecheck analysis: "WARNING: Race reported between Write access at RAW()+0xf0 in raceGroupBasic.cu:40",
# "Error: ..." [manual, logs], "WARN: ..." [cuda11]; hazard reports: "ERROR: Potential WAW hazard detected at __shared__ 0x0
# in block (0,0,0) :", "Warning: (Warp Level Programming) Potential RAW hazard ..." [manual]. Synccheck: "Barrier error
# detected. Divergent thread(s) in warp" [manual], "... in block." [logs]. "Program hit ... on CUDA API call to cudaMemcpy.",
# "Leaked 64 bytes at 0x...", "Malloc/Free error encountered : Double free", "Unused __global__ memory in allocation ..."
# [manual]; "Host API memory access error at host access to ..." [cuda11].
_SEVERITY = r"(?:(?P<sev>Error|Warning|Warn|Info|ERROR|WARNING|WARN|INFO)\s*:\s*)?(?:\([^)]*\)\s*)?"
_ACCESS = re.compile(r"^(?P<potential>Potential )?Invalid (?P<space>__\w+__) (?P<op>\w+) of size (?P<size>[\d,]+)")
_UNINIT = re.compile(r"^Uninitialized (?P<space>__\w+__) memory (?P<op>\w+) of size (?P<size>[\d,]+)")
_RACE = re.compile("^" + _SEVERITY + r"Race reported between (?P<op>Read|Write) access at\s*(?P<at>.*)$")
_HAZARD = re.compile("^" + _SEVERITY + r"Potential (?P<type>RAW|WAR|WAW) hazard detected at (?P<addr>__\w+__ 0x[0-9a-fA-F]+)"
                     r"(?: in block (?P<block>\([^)]*\)))?")
_BARRIER = re.compile(r"^Barrier error detected\.?\s*(?P<why>.*?)\.?$")
_OTHER_HEADS = [(re.compile(pattern), kind) for pattern, kind in (
    (r"^Program hit ", "cuda_api_error"), (r"^Leaked .* on the device heap", "device_heap_leak"), (r"^Leaked ", "leak"),
    (r"^Malloc/Free error encountered", "malloc_free_error"), (r"^Host API memory access error", "host_api_access_error"),
    (r"^Unused (?:__\w+__ )?memory in allocation", "unused_memory"), (r"^Warpgroup MMA sequence error", "warpgroup_mma_error"))]
_BARRIER_KINDS = {"divergent thread(s) in block": "barrier_divergence", "divergent thread(s) in warp": "warp_barrier_divergence",
                  "invalid arguments": "barrier_invalid_arguments", "missing init": "barrier_missing_init",
                  "missing wait": "barrier_missing_wait"}
_RACE_KINDS = {"RAW": "race_read_after_write", "WAR": "race_write_after_read", "WAW": "race_write_after_write"}
_DETAIL = re.compile(r"^(at |in |by thread|Address |Access to |and is |and (?:Read|Write) access|Device Frame|Host Frame|"
                     r"Saved host backtrace|Current Value|(?:Read|Write) Thread|\[[\d,]+ hazards?\]|Not written|"
                     r"Sync mask|during |[\d.]+% of allocation|These unused bytes|Uninitialized access)")
# Details: "by thread (0,0,0) in block (0,0,0)", "Address 0x... is misaligned", "and is 262,132 bytes after the nearest
# allocation at 0x... of size 16 bytes", "and Read access at RAW()+0x280 in raceGroupBasic:46 [4 hazards]", "Write Thread
# (0,0,0) at WAW()+0x2f0 in raceWAW.cu:20" [manual]; "Access to 0x... is out of bounds" [logs].
_TRIPLE = r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)"
_BY_THREAD = re.compile(r"by thread " + _TRIPLE + r" in block " + _TRIPLE)
_THREAD_LINE = re.compile(r"^(?P<op>Read|Write) Thread " + _TRIPLE + r" at (?P<at>.*)$")
_PEER = re.compile(r"^and (?P<op>Read|Write) access at\s*(?P<at>.*)$")
_HAZARDS = re.compile(r"\s*\[([\d,]+) hazards?\]\s*$")
# Frames: "f()+0x160 in x.cu:6" / "unaligned_kernel():0x160 in memcheck_demo.cu:6" [manual], wrapped as "f()+0x70" then
# "in /path/x.cu:53" [logs]; "0x000000c8 in /path/h.cuh:75:void f<double>(double*, int)", "Device Frame:/p/x.cu:20:f(int*)
# (f(int*) : 0x8f0)" [cuda11]; "Device Frame: f<...>+0x10640 in x.cuh:2104" [logs]; without -lineinfo "f(float *)+0x4a0"
# [logs] or "0x2c8 in f(float *)" [cuda11].
_OLD_LOCATION = re.compile(r"^0x[0-9a-fA-F]+ in (?P<path>[^:\s][^:]*?):(?P<line>\d+):(?P<func>.+)$")
_NEW_LOCATION = re.compile(r"^(?P<func>.*) in (?P<path>[^:\s][^:]*):(?P<line>\d+)$")
_PC_IN_FUNCTION = re.compile(r"^0x[0-9a-fA-F]+ in (?P<func>.+)$")
_OLD_DEVICE_FRAME = re.compile(r"^(?P<path>[^:\s][^:]*?):(?P<line>\d+):(?P<func>.+)$")


def _headline_kind(body: str) -> str | None:
    if m := _ACCESS.match(body):
        return ("potential_invalid_" if m["potential"] else "invalid_") + f"{m['space'].strip('_')}_{m['op'].lower()}"
    if m := _UNINIT.match(body):
        return f"uninitialized_{m['space'].strip('_')}_{m['op'].lower()}"
    if _RACE.match(body):
        return "race"
    if m := _HAZARD.match(body):
        return _RACE_KINDS[m["type"]]
    if m := _BARRIER.match(body):
        return _BARRIER_KINDS.get(m["why"].lower(), "barrier_error")
    return next((kind for pattern, kind in _OTHER_HEADS if pattern.match(body)), None)


def _finding(tool: str, record: list[str], source_name: str | None) -> SanitizerFinding:
    lines = _unwrap(record)
    head = lines[0]
    f = SanitizerFinding(tool=tool, kind=_headline_kind(head) or "other", message=head)
    locations: list[tuple[str | None, str | None, int | None]] = []  # (function, path, line), frames in order
    if m := (_ACCESS.match(head) or _UNINIT.match(head)):
        f.access_size = _int(m["size"])
    if m := _RACE.match(head):  # an analysis report: the kind follows from the accesses it names
        f.severity = _severity(m["sev"])
        locations.append(_location(_HAZARDS.sub("", m["at"])))
        peers = [p for line in lines[1:] if (p := _PEER.match(line))]
        f.peers = [_peer(p["op"], p["at"], source_name) for p in peers]
        ops = {p["op"] for p in peers}
        f.kind = ("race_read_after_write" if m["op"] == "Write" and "Read" in ops
                  else "race_write_after_read" if m["op"] == "Read" and "Write" in ops else "race_write_after_write")
    if m := _HAZARD.match(head):
        f.severity = _severity(m["sev"])
        f.address = m["addr"]
        if m["block"] and (b := re.match(_TRIPLE, m["block"])):
            f.block = _triple(b.groups())
    for line in lines[1:]:
        if line.startswith("at "):
            locations.append(_location(line[3:]))
        elif line.startswith("Device Frame:"):
            locations.append(_device_frame(line[len("Device Frame:"):]))
        elif t := _BY_THREAD.search(line):
            f.thread, f.block = f.thread or _triple(t.groups()[:3]), f.block or _triple(t.groups()[3:])
        elif t := _THREAD_LINE.match(line):
            if f.thread is None:
                f.thread = _triple((t[2], t[3], t[4]))
                locations.append(_location(t["at"]))
            else:
                f.peers.append(_peer(t["op"], t["at"], source_name))
        elif line.startswith(("Address ", "Access to ")) and f.address is None:
            f.address = line
        elif line.startswith("and is ") and f.address is not None:
            f.address += " " + line
    if f.address and "misaligned" in f.address and f.kind.startswith("invalid_"):
        f.kind = "misaligned_" + f.kind[len("invalid_"):]
    functions = [fn for fn, _, _ in locations if fn]
    f.kernel = _short_name(functions[-1]) if functions else None  # the outermost device frame is the kernel
    for _, path, line in locations:
        if path and line is not None:
            f.file, f.line = _display(path, source_name), line
            f.message = f.message.replace(path, f.file)
            break
    return f


def _unwrap(lines: list[str]) -> list[str]:
    """Join what newer releases wrap: '... access at' + location, 'at f()+0x70' + 'in x.cu:53', '[N hazards]'."""
    out: list[str] = []
    for line in lines:
        if out and (out[-1].endswith(" at") or line.startswith("in ") or _HAZARDS.fullmatch(line)
                    or out[-1].count('"') % 2 == 1):
            out[-1] = out[-1] + " " + line
        else:
            out.append(line)
    return out


def _location(text: str) -> tuple[str | None, str | None, int | None]:
    text = text.strip()
    if m := _OLD_LOCATION.match(text):
        return m["func"], m["path"], int(m["line"])
    if m := _NEW_LOCATION.match(text):
        return m["func"] or None, m["path"], int(m["line"])
    if m := _PC_IN_FUNCTION.match(text):
        return m["func"], None, None
    return (None if re.fullmatch(r"0x[0-9a-fA-F]+", text) else text or None), None, None


def _device_frame(text: str) -> tuple[str | None, str | None, int | None]:
    text = re.sub(r"\s*\[0x[0-9a-fA-F]+\]$", "", text.strip())          # new: 'f(int *)+0x60 in x.cu:9', 'NVIDIA Internal [0x520]'
    text = re.sub(r" \((?:.*\S)? ?: 0x[0-9a-fA-F]+\)$", "", text)         # old: 'x.cu:20:f(int*) (f(int*) : 0x8f0)'
    if text == "NVIDIA Internal":  # OptiX internals are not the user's kernel
        return None, None, None
    if _NEW_LOCATION.match(text):
        return _location(text)
    if m := _OLD_DEVICE_FRAME.match(text):
        return m["func"], m["path"], int(m["line"])
    return text or None, None, None


def _peer(op: str, at: str, source_name: str | None) -> str:
    hazards = _HAZARDS.search(at)
    _, path, line = _location(at := _HAZARDS.sub("", at))
    where = f"{_display(path, source_name)}:{line}" if path else at.strip()
    return f"{op} at {where}" + (f" [{hazards[1]} hazards]" if hazards else "")


def _display(path: str, source_name: str | None) -> str:
    """With a source name, no machine paths: that name for paths ending in it, the bare file name for others."""
    if source_name is None or path == source_name or path.endswith(("/" + source_name, "\\" + source_name)):
        return source_name or path
    return re.split(r"[\\/]", path)[-1]


def _short_name(signature: str) -> str | None:
    """'void transpose<float>(const float *, float *)+0x1f0' -> 'transpose<float>'."""
    s, depth = re.sub(r"[+:]0x[0-9a-fA-F]+$", "", signature.strip()), 0
    for i in range(len(s) - 1, 0, -1) if s.endswith(")") else ():  # drop the parameter list, templates may hold '('
        depth += {")": 1, "(": -1}.get(s[i], 0)
        if depth == 0:
            s = s[:i].rstrip()
            break
    s = re.sub(r"^(?:(?:static|__global__|__device__|void)\s+)+", "", s)
    return s or None


def _severity(word: str | None) -> str | None:
    return {"warn": "warning"}.get(word.lower(), word.lower()) if word else None


def _triple(values: tuple[str, ...]) -> Triple:
    return (int(values[0]), int(values[1]), int(values[2]))


