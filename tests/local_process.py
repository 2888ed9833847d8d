"""`codspeed-aggregator local` in a process of its own, as a user runs it: started, its API URL
read from what it prints, its output kept (a line per request: read as it comes, so the pipe
never fills), stopped with Ctrl-C."""

import contextlib
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

STOP_SECONDS = 60  # its pollers get 10 s to end an invocation under way; the rest is a loaded machine's


class LocalProcess:
    def __init__(self, process: subprocess.Popen) -> None:
        self.process, self.lines, self.api_url = process, [], None

    @property
    def output(self) -> str:
        return "".join(self.lines)


@contextlib.contextmanager
def local_aggregator(*args: str, env: dict | None = None) -> Iterator[LocalProcess]:
    """Run ``codspeed-aggregator local --port 0 ARGS``; yields once it listens."""
    process = subprocess.Popen(
        [sys.executable, "-m", "codspeed_aggregator.cli", "local", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    running = LocalProcess(process)
    try:
        for line in process.stdout:
            running.lines.append(line)
            if line.startswith("API URL:"):
                running.api_url = line.split()[-1]
            if line.startswith("Ctrl-C"):
                break
        assert running.api_url, running.output + process.stdout.read()
        reader = threading.Thread(target=lambda: running.lines.extend(process.stdout), daemon=True)
        reader.start()
        yield running
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            raise AssertionError(
                f"not stopped {STOP_SECONDS} s after Ctrl-C; its output:\n{running.output[-3000:]}"
            ) from None
        finally:
            if running.api_url:
                reader.join(timeout=10)
