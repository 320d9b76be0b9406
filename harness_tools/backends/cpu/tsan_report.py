"""Reading ThreadSanitizer's data-race reports from a race-check run (see :mod:`.cpu_racecheck`).

A report names two accesses, the one that found the race and the ``Previous`` one, each with its
stack and the thread that made it. Our fibers are named ``block (x,y,z) thread (x,y,z) worker N``. An
access is attributed to its innermost ``kernel.cu`` frame (helpers inlined from cudaopt_cpu.h, such as
``__ldg``, are skipped). The racing address is placed with the regions the executable prints: buffer
arguments, and per pool thread its TLS block (static ``__shared__`` variables, named with the
executable's TLS symbols) and its dynamic shared memory. Reports on the same memory with the same pair
of lines are one :class:`~harness_tools.backends.contract.Race`, counted. A report with no kernel.cu frame on
either side is not the candidate's and is left out (it stays in the log excerpt).

A fiber's name is updated when its pool thread starts a block, so for the earlier access the block is
known only when both accesses come from the same pool thread (whose blocks run one after another, so
a race there lies within one block); otherwise it is left unknown rather than guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness_tools.backends.contract import Access, CaseRequest, Race
from harness_tools.backends.cpu.translate import _DYNAMIC_SHARED
from harness_tools.task.include_guard import code_lines

LOG_EXCERPT_CHARS = 6000
LISTED_RACES = 3

_BUFFER = re.compile(r"^cudaopt-racecheck: buffer (\S+) (0x[0-9a-f]+|\(nil\)) (\d+)$", re.MULTILINE)
_WORKER = re.compile(r"^cudaopt-racecheck: worker (\d+) tls (0x[0-9a-f]+|\(nil\)) (\d+) shared-end (0x[0-9a-f]+)$", re.MULTILINE)
_STATUS = re.compile(r"^cudaopt-racecheck: status (\d+) ?(.*)$", re.MULTILINE)
_REPORT = re.compile(r"^WARNING: ThreadSanitizer: data race.*?(?=^SUMMARY: ThreadSanitizer|^={10,}|\Z)", re.MULTILINE | re.DOTALL)
_ACCESS = re.compile(r"^  (Previous )?(atomic )?(read|write) of size (\d+) at (0x[0-9a-f]+) by (?:thread T(\d+)|main thread)",
                     re.MULTILINE | re.IGNORECASE)
_KERNEL_FRAME = re.compile(r"^\s+#\d+ .*?(?<![\w.])kernel\.cu:(\d+)", re.MULTILINE)
_THREAD = re.compile(r"^  Thread T(\d+) '([^']*)'", re.MULTILINE)
_FIBER = re.compile(r"block \((\d+),(\d+),(\d+)\) thread \((\d+),(\d+),(\d+)\) worker (\d+)")
_LOCATION = re.compile(r"^  Location is (?:global '([^']+)'|(TLS)|(stack)|(heap))", re.MULTILINE)


@dataclass
class Regions:
    """Where the race-check executable put things, from the lines it printed."""

    buffers: list[tuple[str, int, int]] = field(default_factory=list)        # name, start, bytes
    tls: list[tuple[int, int]] = field(default_factory=list)                 # start, bytes (per pool thread)
    dynamic_shared: list[tuple[int, int]] = field(default_factory=list)      # start, end
    tls_symbols: list[tuple[str, int, int]] = field(default_factory=list)    # name, offset, bytes
    extern_shared: str | None = None                                         # the one extern __shared__ name

    def place(self, address: int) -> tuple[str, str | None, int | None]:
        """(memory, variable, byte offset) of an address."""
        for name, start, size in self.buffers:
            if start <= address < start + size:
                return "global", name, address - start
        for start, size in self.tls:
            if start <= address < start + size:
                offset = address - start
                for name, sym_offset, sym_size in self.tls_symbols:
                    if sym_offset <= offset < sym_offset + sym_size:
                        return "shared", name, offset - sym_offset
                return "shared", None, None
        for start, end in self.dynamic_shared:
            if start <= address < end:
                return "shared", self.extern_shared, address - start
        return "unknown", None, None


def parse_regions(log: str, tls_symbols: list[tuple[str, int, int]], request: CaseRequest) -> Regions:
    regions = Regions(tls_symbols=tls_symbols, extern_shared=_extern_shared_name(request.source))
    regions.buffers = [(m[1], _address(m[2]), int(m[3])) for m in _BUFFER.finditer(log)]
    # the runtime rounds dynamic shared memory up to 16 bytes; a sequence's launches may each use a different
    # amount, all below the largest at the same end
    span = -(-max(launch.shared_mem for launch in request.launches) // 16) * 16
    for m in _WORKER.finditer(log):
        if _address(m[2]):
            regions.tls.append((_address(m[2]), int(m[3])))
        end = _address(m[4])
        regions.dynamic_shared.append((end - span, end))
    return regions


def parse_status(log: str) -> tuple[int, str] | None:
    """The launch status the executable printed last, with its message; None if it never got there."""
    found = None
    for m in _STATUS.finditer(log):
        found = (int(m[1]), m[2].strip())
    return found


def parse_races(log: str, regions: Regions) -> list[Race]:
    """Distinct races, in the order first reported."""
    races: dict[tuple, Race] = {}
    for report in _REPORT.finditer(log):
        race = _parse_report(report.group(0), regions)
        if race is None:
            continue
        key = (race.first.memory, race.first.variable, race.first.line, race.first.kind, race.second.line,
               race.second.kind)
        if key in races:
            races[key].count += 1
        else:
            races[key] = race
    return list(races.values())


def _parse_report(text: str, regions: Regions) -> Race | None:
    headers = list(_ACCESS.finditer(text))
    if len(headers) < 2:
        return None
    names = {int(m[1]): _FIBER.search(m[2]) for m in _THREAD.finditer(text)}
    location = _LOCATION.search(text)
    accesses: list[Access] = []
    workers: list[int | None] = []
    for i, header in enumerate(headers[:2]):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        frame = _KERNEL_FRAME.search(text, header.end(), end)
        memory, variable, offset = regions.place(int(header[5], 16))
        if memory == "unknown" and location is not None:
            memory, variable = _location_memory(location)
        fiber = names.get(int(header[6])) if header[6] else None
        accesses.append(Access(
            line=int(frame[1]) if frame else None, kind=header[3].lower(), atomic=bool(header[2]),
            size=int(header[4]), memory=memory, variable=variable, offset=offset,
            thread=tuple(int(fiber[k]) for k in (4, 5, 6)) if fiber else None,
            block=tuple(int(fiber[k]) for k in (1, 2, 3)) if fiber else None))
        workers.append(int(fiber[7]) if fiber else None)
    current, previous = accesses
    if current.line is None and previous.line is None:
        return None  # neither side is kernel code: the runtime's own bookkeeping, not the candidate's race
    if workers[1] is None or workers[1] != workers[0]:
        previous.block = None  # its fiber may have moved on to a later block since
    first, second = sorted((current, previous), key=lambda a: (a.line is None, a.line or 0, a.kind != "write"))
    return Race(first=first, second=second)


def _location_memory(location: re.Match) -> tuple[str, str | None]:
    if location[1]:
        return "global", location[1]  # a __device__ variable
    if location[2]:
        return "shared", None
    if location[3]:
        return "local", None
    return "unknown", None


def describe(races: list[Race]) -> str:
    """One line: 'data race on shared memory `s`: write at kernel.cu(7) vs read at kernel.cu(9) (12 reports)'."""
    parts = []
    for race in races[:LISTED_RACES]:
        a, b = race.first, race.second
        what = f"{a.memory} memory" + (f" `{a.variable}`" if a.variable else "")
        parts.append(f"data race on {what}: {_side(a)} vs {_side(b)} ({race.count} report{'s' if race.count != 1 else ''})")
    if len(races) > LISTED_RACES:
        parts.append(f"and {len(races) - LISTED_RACES} more")
    return "; ".join(parts)


def _side(access: Access) -> str:
    where = f"kernel.cu({access.line})" if access.line is not None else "an unknown line"
    return f"{'atomic ' if access.atomic else ''}{access.kind} at {where}"


def excerpt(log: str) -> str | None:
    """The sanitizer's own words, without our bookkeeping lines, from the first report on, capped."""
    text = "\n".join(line for line in log.splitlines() if not line.startswith("cudaopt-racecheck:"))
    start = text.find("WARNING: ThreadSanitizer")
    text = (text[start:] if start >= 0 else text).strip()
    if not text:
        return None
    return text if len(text) <= LOG_EXCERPT_CHARS else text[: LOG_EXCERPT_CHARS - 40] + "\n… [log truncated]"


def _extern_shared_name(source: str) -> str | None:
    plain = "\n".join(text for _, text in code_lines(source, blank_literals=True))
    names = {m.group("name") for m in _DYNAMIC_SHARED.finditer(plain)}
    return names.pop() if len(names) == 1 else None


def _address(text: str) -> int:
    return 0 if text == "(nil)" else int(text, 16)
