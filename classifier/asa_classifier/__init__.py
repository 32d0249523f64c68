"""ASA workload classifier: dataset loading, ensemble training, report, ONNX export.

See classifier/README.md. Modules:
- schema: the live feature schema (agent/feature_schema.toml) and the model metadata keys;
- dataset: recordings written by `asa record`, the dataset manifest, the split by run;
- ensemble: XGBoost (primary) + RandomForest + SVM with soft voting;
- voting: Algorithm 1 of the ASA paper (time-weighted probability voting), as in Rust;
- report: accuracy, per-class precision/recall, confusion matrix, raw and after voting;
- export: one ONNX file with the three models and the soft vote, plus metadata.
- evaluate: an exported model's accuracy on recorded ticks (`asa calibrate --retrain`).
- apps, train_apps: the per-application class model (issue 40): labelled application rows,
  training with scenarios held out, the same export.
"""

import os as _os

# onnxruntime 1.29+ sends telemetry from Linux (a thread, a device id and an offline cache in
# ~/.cache/Microsoft, an upload endpoint) unless ORT_DISABLE_TELEMETRY=1 when it loads: every
# module of the package may load it (export checks, fold), so the package opts out on import.
# An explicit setting wins.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
