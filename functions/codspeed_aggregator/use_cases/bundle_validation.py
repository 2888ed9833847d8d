"""A bundle that landed, validated as it is read (``domain.bundle``), and in the same pass made
ready to splice where its run merges it: the arrival's read of it, once."""

import logging
from dataclasses import dataclass

from codspeed_rules.bundle import VALGRIND, BundleSummary
from codspeed_rules.index import MadeFrom
from codspeed_rules.verify import NotNormalized

from ..adapters.bucket import Bucket, VersionedStream
from ..adapters.metrics import Metrics
from ..domain.bundle import normalizing, validate_bundle
from ..domain.keys import index_key, normalized_key
from ..domain.records import NormalizedCopy
from ..settings import Settings

log = logging.getLogger(__name__)


@dataclass
class BundleValidation:
    settings: Settings
    store: Bucket  # S3: the bundle read; its normalized copy and index written under normalized/
    metrics: Metrics

    def validated(
        self, key: str, version_id: str | None, executor: str, merged: bool
    ) -> tuple[BundleSummary, str | None, NormalizedCopy | None]:
        """Validate a bundle; a valgrind one a run ``merged`` upstream (``one-upload``) is also made
        ready to splice in the same pass: one the client normalized is verified (then it is its own
        normalized copy), any other is normalized into a copy. A run of parts sends it as it came:
        no copy (should a later run merge it, it is merged from the bundle itself). Answers
        (summary, version validated, where the copy and its index are)."""
        with self.store.open(key, version_id) as stream:
            if executor != VALGRIND or not merged:
                return validate_bundle(stream, executor), stream.version_id, None
            version_id = stream.version_id
            try:
                return self._normalizing(key, stream, executor, verify=True)
            except NotNormalized as exc:
                log.warning("%s is marked as normalized and is not (%s): normalized again", key, exc)
                self.metrics.add("NormalizedBundlesRedone", 1, "Count")
        with self.store.open(key, version_id) as stream:
            return self._normalizing(key, stream, executor, verify=False)

    def _normalizing(
        self, key: str, stream: VersionedStream, executor: str, verify: bool
    ) -> tuple[BundleSummary, str | None, NormalizedCopy | None]:
        with self.store.spool(normalized_key(key)) as sink:
            reading = normalizing(sink, self.settings.merge_level, verify=verify)
            summary = validate_bundle(stream, executor, gunzip=reading.gunzip, tap=reading.tap)
            index = reading.close(summary.listing)
            if index is None or reading.verifier is not None:
                sink.abandon()  # nothing to keep: a tar that could not be cut, or the bundle is its own copy
        if index is None:
            return summary, stream.version_id, None
        index.bundle = MadeFrom(key, stream.version_id)
        index_version = self.store.put_json(index_key(key), index.to_json())
        if reading.verifier is not None:
            return summary, stream.version_id, NormalizedCopy(key, stream.version_id, index_version)
        return summary, stream.version_id, NormalizedCopy(normalized_key(key), sink.version_id, index_version)
