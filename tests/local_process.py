"""`codspeed-aggregator local` in a process of its own, as a user runs it: started, its API URL
read from what it prints, its output kept (a line per request: read as it comes, so the pipe
never fills), stopped with Ctrl-C."""

import contextlib
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator


class LocalProcess:
    def __init__(self, process: subprocess.Popen) -> None:
        self.process, self.lines, self.api_url = process, [], None

    @property
    def output(self) -> str:
        return "".join(self.lines)


@contextlib.contextmanager
def local_aggregator(*args: str, env: dict | None = None) -> Iterator[LocalProcess]:
    """Run ``codspeed-aggregator local --port 0 ARGS``; yields once it listens."""
    process = subprocess.Popen([sys.executable, "-m", "codspeed_aggregator.cli", "local", "--port", "0", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
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
        process.wait(timeout=30)
        if running.api_url:
            reader.join(timeout=10)
