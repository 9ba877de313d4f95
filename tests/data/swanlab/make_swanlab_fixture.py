"""Write tests/data/swanlab/ with the genuine swanlab package (NOT a grpofit dependency).

Run it in a scratch virtualenv that has ``pip install swanlab==VERSION``, from an empty folder:

    python make_swanlab_fixture.py OUT_DIR

It logs a small GRPO-like run offline (40 steps; step 0 logs 0.0 and step 7 a NaN loss, which
check proto3's left-out zeros and NaN), waits long enough for one sample of SwanLab's own
system metrics, and then decodes the run's log with the package's OWN reader into
``expected.json`` ({key: [[step, value or null for NaN], ...]}), which the tests compare
grpofit's reader against. The run folder is copied to OUT_DIR/<version>/ (without
swanlog/.gitignore, whose "*" would hide it from git).
"""

import glob
import json
import math
import os
import shutil
import sys
import time

import swanlab

out_root = sys.argv[1]
run = swanlab.init(project="grpofit-fixture", experiment_name="grpo-g8-tiny", mode="offline",
                   config={"learning_rate": 1e-6, "num_generations": 8, "beta": 0.04})
for s in range(40):
    swanlab.log({"train/reward": 0.0 if s == 0 else 0.9 - 0.6 * math.exp(-s / 10),
                 "train/kl": 0.001 * s,
                 "train/loss": float("nan") if s == 7 else 1.0 / (s + 1),
                 "train/completions": 64 * s}, step=s)
    if s % 10 == 9:
        swanlab.log({"eval/reward": 0.5 + 0.01 * s}, step=s)
    time.sleep(0.3)  # 12 s: SwanLab samples its system metrics at least every 10 s
swanlab.finish()

[run_dir] = glob.glob("swanlog/run-*")
series: dict = {}


def add(key, step, value):
    series.setdefault(key, []).append([int(step), None if math.isnan(value) else float(value)])


new = glob.glob(os.path.join(run_dir, "run-*.swanlab"))
if new:  # 0.7 and later: protobuf records
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.sdk.internal.core_python.store import DataStoreReader

    reader = DataStoreReader()
    reader.open(new[0])
    for data in reader:
        rec = Record()
        rec.ParseFromString(data)
        if rec.WhichOneof("record_type") == "scalar":
            add(rec.scalar.key, rec.scalar.step, rec.scalar.value.number)
else:  # 0.6: JSON records in backup.swanlab
    from swanlab.data.porter.datastore import DataStore

    store = DataStore()
    store.open_for_scan(os.path.join(run_dir, "backup.swanlab"))
    for text in store:
        rec = json.loads(text)
        if rec["model_type"] == "Scalar":
            v = rec["data"]["metric"]["data"]
            add(rec["data"]["key"], rec["data"]["step"], float("nan") if v == "NaN" else v)

dest = os.path.join(out_root, swanlab.__version__)
shutil.copytree(run_dir, os.path.join(dest, os.path.basename(run_dir)))
with open(os.path.join(dest, "expected.json"), "w") as f:
    json.dump({"swanlab": swanlab.__version__, "run": os.path.basename(run_dir), "scalars": series}, f, indent=1, sort_keys=True)
print(dest)
