"""A ``put_samples`` for the ``replay --put`` CLI test: appends each call as a JSON line to $REPLAY_PUT_OUT."""

from __future__ import annotations

import json
import os


def put_samples(sample_ids, fields, tags):
    with open(os.environ["REPLAY_PUT_OUT"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"sample_ids": list(sample_ids), "fields": sorted(fields), "group_id": tags[0]["group_id"]}) + "\n")
