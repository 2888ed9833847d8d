"""Bundle validation (``codspeed_rules.bundle``, shared with codspeed-client) with the
aggregator's gzip codec, ISA-L: several times faster than zlib at the same format."""

from functools import partial

from codspeed_rules import bundle as rules

from . import gz

validate_bundle = partial(rules.validate_bundle, gunzip=gz.reader, gunzip_errors=(*gz.ERRORS, *rules.GUNZIP_ERRORS))
unpacked = partial(rules.unpacked, gunzip=gz.reader)
