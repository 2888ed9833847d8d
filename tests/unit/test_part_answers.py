"""What the upstream answered for one upload of a run, as its part items keep it: one codec, which
reads what 1.0.0 wrote and keeps what a later release added."""

import json

from codspeed_aggregator.domain.part_answers import Announced, Delivered


def test_what_1_0_0_wrote_is_read_and_written_back_as_it_was():
    announced = '{"run_id": "up-7", "upload_url": "https://s3.example/put?sig=1", "md5": "bQ=="}'
    delivered = '{"run_id": "up-7", "size": 2048, "md5": "bQ=="}'
    assert Announced.from_json(announced) == Announced("up-7", "https://s3.example/put?sig=1", "bQ==")
    assert Delivered.from_json(delivered) == Delivered("up-7", 2048, "bQ==")
    assert json.loads(Announced.from_json(announced).to_json()) == json.loads(announced)
    assert json.loads(Delivered.from_json(delivered).to_json()) == json.loads(delivered)  # no run_hash: none said


def test_a_tokenless_uploads_run_hash_goes_with_it_and_a_shards_record_takes_its_fields():
    sent = Delivered("up-7", 2048, "bQ==", run_hash="ab" * 32)
    assert Delivered.from_json(sent.to_json()) == sent
    assert sent.fields() == {"run_id": "up-7", "size": 2048, "md5": "bQ==", "run_hash": "ab" * 32}


def test_the_fields_a_later_release_wrote_are_kept():
    later = '{"run_id": "up-7", "size": 1, "md5": null, "region": "eu"}'
    read = Delivered.from_json(later)
    assert read.later_fields == {"region": "eu"} and json.loads(read.to_json()) == json.loads(later)
