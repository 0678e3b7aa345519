"""Run a Python module under a sampler of the process's own CPU time (`scale.py --profile`).

Why not py-spy, which this replaced: on the benchmark's machine both cores are busy, and
py-spy samples by the wall clock. A thread that is ready to run but waits for a core
still counts, charged to the line it will resume at (an `epoll_wait` or a syscall's
return). At 1,000 nodes py-spy gave 2,396 samples at 50 Hz (48 s) for an operator that
spent 22 s of CPU, 29% of them on the event loop's own line. A timer on the process's
CPU clock (`ITIMER_PROF`) fires only while the process runs, so its samples add up to
the CPU it spent.

What it cannot see: time spent in C (the event loop's native code, TLS, msgspec) is
charged to the next line of Python the interpreter runs, because a signal's handler runs
between two bytecodes. A line that calls into C (`SSLObject.read`, a decoder's
`decode`) shows that C's cost as its own; the line a C event loop calls back into first
shows the loop's.

    python bench/_cpu_profile.py OUT [--interval SECONDS] -m MODULE [ARGS...]

OUT gets one line per distinct stack, `frame;frame;... count`, outermost frame first
(the collapsed format flame graph tools read), rewritten every few seconds and at exit.
"""

from __future__ import annotations

import argparse
import atexit
import os
import runpy
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import CodeType, FrameType

DUMP_EVERY_SECONDS = 5.0


class CpuSampler:
    """Counts the Python stack each time the process has spent `interval` CPU seconds."""

    def __init__(self, out: Path, interval: float) -> None:
        self.out = out
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self._names: dict[CodeType, str] = {}
        self._roots = sorted({p for p in sys.path if p}, key=len, reverse=True)
        self._dumping = threading.Lock()  # the periodic dump and the one at exit

    def start(self) -> None:
        signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, self.interval, self.interval)
        atexit.register(self.stop)
        threading.Thread(target=self._dump_now_and_then, daemon=True).start()

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        self.dump()

    def dump(self) -> None:
        # dict.copy runs in C: no handler can run and resize the counter while it copies.
        partial = self.out.with_suffix(".partial")
        with self._dumping:
            snapshot = dict.copy(self.counts)
            partial.write_text("".join(f"{stack} {n}\n" for stack, n in snapshot.items()))
            os.replace(partial, self.out)

    def _dump_now_and_then(self) -> None:
        while True:
            time.sleep(DUMP_EVERY_SECONDS)
            self.dump()

    def _sample(self, signum: int, frame: FrameType | None) -> None:
        frames: list[str] = []
        while frame is not None:
            frames.append(f"{self._name(frame.f_code)}:{frame.f_lineno})")
            frame = frame.f_back
        frames.reverse()
        self.counts[";".join(frames)] += 1

    def _name(self, code: CodeType) -> str:
        """`qualname (file` with the file relative to its entry of sys.path, as py-spy
        writes frames, so `scale.profile_top` reads either."""
        name = self._names.get(code)
        if name is None:
            path = code.co_filename
            for root in self._roots:
                if path.startswith(root + os.sep):
                    path = path[len(root) + 1 :]
                    break
            name = self._names[code] = f"{code.co_qualname} ({path}"
        return name


def main(argv: list[str]) -> None:
    usage = "_cpu_profile.py OUT [--interval SECONDS] -m MODULE [ARGS...]"
    if "-m" not in argv or argv.index("-m") + 1 >= len(argv):
        raise SystemExit(f"usage: {usage}")
    split = argv.index("-m")
    module, args = argv[split + 1], argv[split + 2 :]
    parser = argparse.ArgumentParser(usage=usage)
    parser.add_argument("out", type=Path, help="where the collapsed stacks go")
    parser.add_argument("--interval", type=float, default=0.004, help="CPU s per sample")
    options = parser.parse_args(argv[:split])
    sys.path[0] = os.getcwd()  # as `python -m` has it, not this script's folder
    CpuSampler(options.out, options.interval).start()
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
