"""How ``codspeed-aggregator``'s commands fail: one sentence, one exit code."""

USAGE, CONFIG, NOTHING, INPUT = 2, 3, 5, 7
EXIT_CODES = "exit codes: 0 done; 2 usage; 3 configuration or environment; 5 nothing to act on; 7 bad input file."


class Failure(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code
