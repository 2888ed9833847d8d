"""The client gives back a grant whose PUT was not answered, saying why; a real signal where a signal
stops it. The aggregator's side: tests/integration/test_give_back.py and tests/e2e/test_give_back.py."""

import os
import signal
from pathlib import Path

import pytest

from codspeed_client.api import UploadExpired
from codspeed_client.bundle import Verdict
from codspeed_client.give_back import given_back_unless_sent
from tests.factories import bundle

GRANT = {"key": "bundles/acme%2Fw/7001/2/ab12.tar.gz", "upload_id": "ab12"}


class _Api:
    """The aggregator as the give-back sees it: what it was told."""

    def __init__(self, fails: bool = False) -> None:
        self.given_back: list[tuple[str, str]] = []
        self.fails = fails

    def give_back(self, key: str, reason: str) -> dict:
        if self.fails:
            raise OSError("the aggregator could not be reached")
        self.given_back.append((key, reason))
        return {}


def _verdict(tmp_path: Path, data: bytes) -> Verdict:
    path = tmp_path / "shard.tar.gz"
    path.write_bytes(data)
    verdict = Verdict(path, "valgrind")
    verdict._thread.join()  # its check done: the reason, if any, is known
    return verdict


def test_sigterm_before_the_put_was_answered_gives_the_grant_back_and_ends_as_the_signal_would(tmp_path):
    import threading

    assert threading.current_thread() is threading.main_thread()  # else the signal would end this worker
    api = _Api()
    with pytest.raises(SystemExit) as ended, given_back_unless_sent(api, GRANT, _verdict(tmp_path, bundle())):
        os.kill(os.getpid(), signal.SIGTERM)
    assert ended.value.code == 128 + signal.SIGTERM
    assert api.given_back == [(GRANT["key"], "the push was terminated (SIGTERM) before its bundle was sent")]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the job's own handling, back


def test_sigint_and_a_bundle_refused_on_its_way_say_so(tmp_path):
    api = _Api()
    with pytest.raises(KeyboardInterrupt), given_back_unless_sent(api, GRANT, _verdict(tmp_path, bundle())):
        raise KeyboardInterrupt
    refused = _verdict(tmp_path, b"PK\x03\x04 a zip, not a tar.gz")
    with pytest.raises(RuntimeError), given_back_unless_sent(api, GRANT, refused):
        raise RuntimeError("the upload stopped")
    assert [why for _, why in api.given_back] == [
        "the push was interrupted (SIGINT) before its bundle was sent",
        f"its bundle would be refused by the aggregator: {refused.reason}",
    ]
    assert "neither gzip-compressed nor a tar archive" in refused.reason


def test_a_put_answered_or_an_expired_url_gives_nothing_back_and_a_failing_give_back_is_a_warning(tmp_path, capsys):
    api = _Api()
    verdict = _verdict(tmp_path, bundle())
    with given_back_unless_sent(api, GRANT, verdict):
        pass  # the PUT answered 2xx: the bundle counts
    with pytest.raises(UploadExpired), given_back_unless_sent(api, GRANT, verdict):
        raise UploadExpired  # nothing waits for an expired URL: the push asks for another
    assert api.given_back == []
    with pytest.raises(ConnectionError), given_back_unless_sent(_Api(fails=True), GRANT, verdict):
        raise ConnectionError("reset by peer")
    assert (
        "warning: upload ab12 could not be given back (the aggregator could not be reached)" in capsys.readouterr().err
    )
