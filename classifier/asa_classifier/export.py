"""ONNX export: one file holding the three members and the soft vote, plus metadata.

Each member is converted on its own (XGBoost with vector leaves by `xgboost_vector_leaves`
below, with scalar leaves by onnxmltools, target opset 15; the scikit-learn pipelines with
skl2onnx, opset 15, no ZipMap), its names prefixed, all three fed
from one input `features` (float32 [N, F]; the SVM through log(1 + x) of some columns when the
ensemble was trained so, `asa.svm_log1p_features`), and their `probabilities` outputs combined as
Σ weight · p into the output `probabilities` (float32 [N, C]), then folded into fewer
operators with the same outputs (fold.py). Metadata keys: schema.py.
"""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxmltools.convert import convert_xgboost
from onnxmltools.convert.common.data_types import FloatTensorType as XgbFloatTensorType
from skl2onnx import convert_sklearn
from skl2onnx.common.data_types import FloatTensorType

from . import schema as s
from .ensemble import Ensemble
from .fold import agent_session, fold
from .schema import FeatureSchema

OPSET = 15


def xgboost_vector_leaves(model, n_features: int) -> onnx.ModelProto | None:
    """An XGBoost multi-class model whose trees have vector leaves (`multi_strategy=
    "multi_output_tree"`: one tree per round for every class) as one TreeEnsembleClassifier
    (input `features`, outputs `label` and `probabilities`); None for scalar-leaf trees.
    onnxmltools converts only scalar leaves. Follows XGBoost's own prediction: a node sends x to
    its left child when x < split_condition (float32), a missing x along default_left; a leaf's
    weights are leaf_weights[i*K:(i+1)*K] with i = its right_children entry; the margin is
    base_score (a vector, margin space) plus the leaves; softmax over the K classes."""
    dump = json.loads(model.get_booster().save_raw("json"))
    learner = dump["learner"]
    if learner["objective"]["name"] != "multi:softprob":
        return None
    trees = learner["gradient_booster"]["model"]["trees"]
    classes = int(learner["learner_model_param"]["num_class"])
    if not trees or int(trees[0]["tree_param"]["size_leaf_vector"]) != classes:
        return None
    base = [float(v) for v in json.loads(learner["learner_model_param"]["base_score"])]
    nodes = {k: [] for k in ("treeids", "nodeids", "featureids", "modes", "values", "truenodeids",
                             "falsenodeids", "missing_value_tracks_true")}
    leaves = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
    for t, tree in enumerate(trees):
        if any(tree["split_type"]) or tree["categories"]:
            raise ValueError("categorical splits are not supported")
        for n, left in enumerate(tree["left_children"]):
            leaf = left == -1
            right = tree["right_children"][n]
            for key, value in (("treeids", t), ("nodeids", n), ("featureids", 0 if leaf else tree["split_indices"][n]),
                               ("modes", "LEAF" if leaf else "BRANCH_LT"),
                               ("values", 0.0 if leaf else float(np.float32(tree["split_conditions"][n]))),
                               ("truenodeids", 0 if leaf else left), ("falsenodeids", 0 if leaf else right),
                               ("missing_value_tracks_true", 0 if leaf else int(tree["default_left"][n]))):
                nodes[key].append(value)
            if leaf:
                weights = tree["leaf_weights"][right * classes:(right + 1) * classes]
                leaves["treeids"] += [t] * classes
                leaves["nodeids"] += [n] * classes
                leaves["ids"] += list(range(classes))
                leaves["weights"] += [float(w) for w in weights]
    node = helper.make_node(
        "TreeEnsembleClassifier", ["features"], ["label", "probabilities"], domain="ai.onnx.ml",
        name="TreeEnsembleClassifier", classlabels_int64s=list(range(classes)), post_transform="SOFTMAX",
        base_values=base, **{f"nodes_{k}": v for k, v in nodes.items()},
        class_treeids=leaves["treeids"], class_nodeids=leaves["nodeids"], class_ids=leaves["ids"],
        class_weights=leaves["weights"])
    graph = helper.make_graph(
        [node], "xgboost_vector_leaves",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [None, n_features])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
         helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, classes])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("ai.onnx.ml", 1)])


def _member_graph(model: onnx.ModelProto, prefix: str, input_name: str):
    model = onnx.compose.add_prefix(model, prefix)
    graph = model.graph
    old_input = graph.input[0].name
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old_input:
                node.input[i] = input_name
    outputs = [o.name for o in graph.output if o.name.endswith("probabilities")]
    if len(outputs) != 1:
        raise RuntimeError(f"member {prefix}: expected one probabilities output, got {[o.name for o in graph.output]}")
    return model, outputs[0]


def _log1p_nodes(source: str, output: str, n: int, columns: tuple[int, ...]):
    """Nodes computing `output` = log(1 + `source`) in `columns`, `source` elsewhere (Add, Log,
    Where: the order ensemble.log1p_columns computes in, so NaN stays NaN), and their constants."""
    mask = np.zeros(n, dtype=bool)
    mask[list(columns)] = True
    initializers = [numpy_helper.from_array(np.array([1.0], dtype=np.float32), "log1p_one"),
                    numpy_helper.from_array(mask, "log1p_columns")]
    nodes = [helper.make_node("Add", [source, "log1p_one"], ["log1p_shifted"], name="log1p_add"),
             helper.make_node("Log", ["log1p_shifted"], ["log1p_all"], name="log1p_log"),
             helper.make_node("Where", ["log1p_columns", "log1p_all", source], [output], name="log1p_select")]
    return nodes, initializers


def to_onnx(ensemble: Ensemble, schema: FeatureSchema, trained_on: str,
            training_date: str | None = None, folded: bool = True) -> onnx.ModelProto:
    """The ensemble as one ONNX model with ASA's metadata; `folded` (the default) folds it into
    fewer operators with the same outputs (fold.py)."""
    n = len(schema.features)
    initial = [("features", FloatTensorType([None, n]))]
    sklearn_opsets = {"": OPSET, "ai.onnx.ml": 3}
    members = {}
    for name, fitted in ensemble.models.items():
        if name == "xgboost":
            members[name] = xgboost_vector_leaves(fitted, n) or convert_xgboost(
                fitted, initial_types=[("features", XgbFloatTensorType([None, n]))], target_opset=OPSET)
        else:
            members[name] = convert_sklearn(fitted, initial_types=initial, target_opset=sklearn_opsets,
                                            options={"zipmap": False})
    nodes, initializers, weighted, opsets = [], [], [], {}
    member_input = s.INPUT_NAME
    if ensemble.ignored:
        # Ignored features: the input times a 0/1 mask (NaN stays NaN, which the members treat
        # as 0 after imputation, as in training, where the column was 0 throughout).
        mask = np.ones(n, dtype=np.float32)
        mask[list(ensemble.ignored)] = 0.0
        initializers.append(numpy_helper.from_array(mask, "ignored_features_mask"))
        member_input = "features_used"
        nodes.append(helper.make_node("Mul", [s.INPUT_NAME, "ignored_features_mask"], [member_input],
                                      name="ignore_features"))
    svm_input = member_input
    if ensemble.svm_log_columns and "svm" in members:
        svm_input = "svm_log1p_features"
        log_nodes, log_initializers = _log1p_nodes(member_input, svm_input, n, ensemble.svm_log_columns)
        nodes.extend(log_nodes)
        initializers.extend(log_initializers)
    for name, member in members.items():
        prefixed, output = _member_graph(member, f"{name}_", svm_input if name == "svm" else member_input)
        nodes.extend(prefixed.graph.node)
        initializers.extend(prefixed.graph.initializer)
        for op in prefixed.opset_import:
            opsets[op.domain] = max(opsets.get(op.domain, 0), op.version)
        weight = f"{name}_vote_weight"
        initializers.append(numpy_helper.from_array(np.array([ensemble.weights[name]], dtype=np.float32), weight))
        nodes.append(helper.make_node("Mul", [output, weight], [f"{name}_weighted"], name=f"{name}_weighting"))
        weighted.append(f"{name}_weighted")
    nodes.append(helper.make_node("Sum", weighted, [s.OUTPUT_NAME], name="soft_vote"))
    # The weighting and the vote are standard operators: an ensemble of XGBoost alone imports
    # only the ML domain from its converter.
    opsets[""] = max(opsets.get("", 0), OPSET)
    classes = len(ensemble.classes)
    graph = helper.make_graph(
        nodes, "asa_workload_classifier",
        [helper.make_tensor_value_info(s.INPUT_NAME, TensorProto.FLOAT, [None, n])],
        [helper.make_tensor_value_info(s.OUTPUT_NAME, TensorProto.FLOAT, [None, classes])],
        initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(opsets.items())],
                              producer_name="asa_classifier")
    model.ir_version = 8
    meta = {
        s.META_MODEL_SCHEMA: s.MODEL_SCHEMA,
        s.META_MODEL_VERSION: str(s.MODEL_VERSION),
        s.META_FEATURE_SCHEMA: schema.name,
        s.META_FEATURE_SCHEMA_VERSION: str(schema.version),
        s.META_FEATURE_NAMES: json.dumps(list(schema.features)),
        s.META_CLASS_NAMES: json.dumps(list(ensemble.classes)),
        s.META_TRAINING_DATE: training_date or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        s.META_ENSEMBLE: json.dumps({"members": list(members), "weights": ensemble.weights, "soft_voting": True}),
        s.META_TRAINED_ON: trained_on,
    }
    if ensemble.svm_log_columns and "svm" in members:
        meta[s.META_SVM_LOG1P_FEATURES] = json.dumps([schema.features[i] for i in ensemble.svm_log_columns])
    if ensemble.ignored:
        meta[s.META_IGNORED_FEATURES] = json.dumps([schema.features[i] for i in ensemble.ignored])
    for key, value in meta.items():
        model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
    onnx.checker.check_model(model)
    return fold(model) if folded else model


def read_metadata(path) -> dict[str, str]:
    model = onnx.load(str(path), load_external_data=False)
    return {p.key: p.value for p in model.metadata_props}


class OnnxClassifier:
    """The exported model run with onnxruntime; refuses a model made for another feature schema."""

    def __init__(self, path, live: FeatureSchema):
        self.meta = read_metadata(path)
        if self.meta.get(s.META_MODEL_SCHEMA) != s.MODEL_SCHEMA or self.meta.get(s.META_MODEL_VERSION) != str(s.MODEL_VERSION):
            raise ValueError(f"{path}: not an {s.MODEL_SCHEMA} v{s.MODEL_VERSION} model")
        live.check_same(s.metadata_schema(self.meta), f"model {path}")
        self.classes = json.loads(self.meta[s.META_CLASS_NAMES])
        # The agent's session options, so the report's latency is measured the way the agent
        # runs the model.
        self.session = agent_session(path)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return self.session.run([s.OUTPUT_NAME], {s.INPUT_NAME: np.asarray(x, dtype=np.float32)})[0]
