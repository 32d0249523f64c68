"""ASA workload classifier: dataset loading, ensemble training, report, ONNX export.

See classifier/README.md. Modules:
- schema: the live feature schema (agent/feature_schema.toml) and the model metadata keys;
- dataset: recordings written by `asa record`, the dataset manifest, the split by run;
- ensemble: XGBoost (primary) + RandomForest + SVM with soft voting;
- voting: Algorithm 1 of the ASA paper (time-weighted probability voting), as in Rust;
- report: accuracy, per-class precision/recall, confusion matrix, raw and after voting;
- export: one ONNX file with the three models and the soft vote, plus metadata.
"""
