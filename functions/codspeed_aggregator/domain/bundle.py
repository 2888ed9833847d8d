"""Bundle validation (``codspeed_rules.bundle``, shared with codspeed-client) with the
aggregator's gzip codec, ISA-L: several times faster than zlib at the same format."""

from functools import partial

from codspeed_rules import bundle as rules
from codspeed_rules.normalize import Normalizer, Writable
from codspeed_rules.verify import Normalizing

from . import gz

validate_bundle = partial(rules.validate_bundle, gunzip=gz.reader, gunzip_errors=(*gz.ERRORS, *rules.GUNZIP_ERRORS))
unpacked = partial(rules.unpacked, gunzip=gz.reader)


def normalizing(out: Writable | None, level: int = gz.DEFAULT_LEVEL, *, verify: bool = True) -> Normalizing:
    """Validation's gunzip and tap that verify a bundle marked as normalized, and normalize any
    other into ``out`` (None: refuse it with NotNormalized). Either way each segment is inflated
    alone once, here, so that no forward inflates it again (``INFLATED_ALONE``)."""
    normalizer = (
        Normalizer(out, level, compressor=gz.raw_compressor, crc32=gz.crc32, prove=gz.raw_inflater)
        if out is not None
        else None
    )
    return Normalizing(normalizer, gz.reader, inflater=gz.raw_inflater, crc32=gz.crc32, verify=verify)
