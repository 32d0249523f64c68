"""Folds the exported ensemble graph into fewer ONNX operators, with the same outputs.

ONNX Runtime pays a fixed cost per operator on every run (a few microseconds for a one-row
input), and the graph `export.to_onnx` composes from the three converters has 13 operators
for one row of features. Each fold below removes operators without changing what the graph
computes for any input that is finite or NaN (the agent turns every other value into NaN):

- **mask**: the ignored-features mask (`input * 0/1`). The trees never split on an ignored
  column (it was constant in training: checked here, else the mask stays), and the SVM's
  scaler gets scale 0 for it (its offset is 0: checked), so the column reaches no member.
- **forest imputer**: the random forest's median imputer. A tree node on feature f sends a
  NaN where the imputed median would go: `nodes_missing_value_tracks_true` = (median <= threshold),
  compared in float32 as ONNX Runtime compares.
- **forest weight**: the forest's soft-vote weight multiplied into its leaf weights
  (`post_transform` NONE, so its probabilities are linear in them; more than two classes).
- **zero leaf weights**: a tree ensemble's class weights that are exactly 0 (skl2onnx writes all
  C weights of every forest leaf, most leaves are pure; XGBoost's vector leaves hold zeros
  too): adding 0 changes no sum. Not with two classes (ONNX Runtime's binary case depends on
  which class ids have weights); every leaf keeps at least one entry and every class one.
- **cast**: the SVM converter's float-to-float Cast.
- **vote**: the weighted sum as a chain of Gemm nodes (alpha * p @ I + beta * acc), one per
  member after the first, instead of one Mul per member and a Sum.

With the weights of `ensemble.WEIGHTS` (powers of two) the folded graph's outputs equal the
unfolded graph's to float32 rounding of the sum's order (checked by `check_same_outputs`).
Run on a model file: `python -m asa_classifier.fold MODEL [--out FILE] [--check DATA.parquet ...]`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from . import schema as s

META_FOLDS = "asa.graph_folds"


def _attr(node, name):
    for a in node.attribute:
        if a.name == name:
            return a
    return None


def _set_attr(node, attr):
    for i, a in enumerate(node.attribute):
        if a.name == attr.name:
            node.attribute.remove(a)
            node.attribute.insert(i, attr)
            return
    node.attribute.append(attr)


def _initializer(graph, name):
    for init in graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    return None


def _drop_initializer(graph, name):
    for init in list(graph.initializer):
        if init.name == name:
            graph.initializer.remove(init)


def _consumers(graph, name):
    return [n for n in graph.node if name in n.input]


def _producer(graph, name):
    for n in graph.node:
        if name in n.output:
            return n
    return None


def _rename_input(graph, old, new):
    for n in graph.node:
        for i, name in enumerate(n.input):
            if name == old:
                n.input[i] = new


def _tree_features(node) -> set[int]:
    modes = [m.decode() for m in _attr(node, "nodes_modes").strings]
    ids = _attr(node, "nodes_featureids").ints
    return {f for f, m in zip(ids, modes) if m != "LEAF"}


def _fold_mask(graph, folds):
    mask_node = next((n for n in graph.node if n.name == "ignore_features"), None)
    if mask_node is None:
        return
    mask = _initializer(graph, mask_node.input[1])
    ignored = set(np.flatnonzero(mask == 0.0).tolist())
    if not np.all((mask == 0.0) | (mask == 1.0)):
        return
    masked = mask_node.output[0]
    users = _consumers(graph, masked)
    for user in users:
        if user.op_type == "TreeEnsembleClassifier":
            if _tree_features(user) & ignored:
                return  # a tree splits on an ignored column: the mask stays
        elif user.op_type == "Imputer":
            scaler = _consumers(graph, user.output[0])
            if len(scaler) != 1 or scaler[0].op_type != "Scaler":
                return
            offset = np.array(_attr(scaler[0], "offset").floats, dtype=np.float32)
            if np.any(offset[list(ignored)] != 0.0):
                return
        else:
            return
    for user in users:
        if user.op_type == "Imputer":
            scaler = _consumers(graph, user.output[0])[0]
            scale = np.array(_attr(scaler, "scale").floats, dtype=np.float32)
            scale[list(ignored)] = 0.0
            _set_attr(scaler, helper.make_attribute("scale", scale.tolist()))
    _rename_input(graph, masked, mask_node.input[0])
    graph.node.remove(mask_node)
    _drop_initializer(graph, mask_node.input[1])
    folds.append("mask")


def _fold_tree_imputer(graph, folds):
    for imputer in [n for n in graph.node if n.op_type == "Imputer"]:
        users = _consumers(graph, imputer.output[0])
        if len(users) != 1 or users[0].op_type != "TreeEnsembleClassifier":
            continue
        tree = users[0]
        replaced = _attr(imputer, "replaced_value_float")
        if replaced is None or not np.isnan(replaced.f):
            continue
        medians = np.array(_attr(imputer, "imputed_value_floats").floats, dtype=np.float32)
        if len(medians) == 1:  # one value for every feature (the operator broadcasts it)
            medians = np.full(max(_attr(tree, "nodes_featureids").ints) + 1, medians[0])
        modes = [m.decode() for m in _attr(tree, "nodes_modes").strings]
        if any(m not in ("BRANCH_LEQ", "LEAF") for m in modes):
            continue
        ids = _attr(tree, "nodes_featureids").ints
        thresholds = np.array(_attr(tree, "nodes_values").floats, dtype=np.float32)
        old = _attr(tree, "nodes_missing_value_tracks_true")
        if old is not None and any(old.ints):
            continue  # the tree has missing-value directions of its own
        tracks = [int(m == "BRANCH_LEQ" and medians[f] <= t) for f, t, m in zip(ids, thresholds, modes)]
        _set_attr(tree, helper.make_attribute("nodes_missing_value_tracks_true", tracks))
        _rename_input(graph, imputer.output[0], imputer.input[0])
        graph.node.remove(imputer)
        folds.append(f"imputer:{tree.name}")


def _fold_zero_leaf_weights(graph, classes, folds):
    if classes <= 2:
        return
    for tree in [n for n in graph.node if n.op_type == "TreeEnsembleClassifier"]:
        columns = {k: _attr(tree, f"class_{k}") for k in ("treeids", "nodeids", "ids", "weights")}
        weights = np.array(columns["weights"].floats, dtype=np.float32)
        leaves = list(zip(columns["treeids"].ints, columns["nodeids"].ints))
        keep = weights != 0.0
        # The first entry of a leaf whose weights are all zero stays.
        seen_nonzero = {leaf for leaf, k in zip(leaves, keep) if k}
        first = set()
        for i, leaf in enumerate(leaves):
            if leaf not in seen_nonzero and leaf not in first:
                keep[i] = True
                first.add(leaf)
        ids = np.array(columns["ids"].ints)
        if keep.all() or len(set(ids[keep].tolist())) != len(set(ids.tolist())):
            continue
        for key, attr in columns.items():
            values = attr.floats if key == "weights" else attr.ints
            kept = [v for v, k in zip(values, keep) if k]
            _set_attr(tree, helper.make_attribute(f"class_{key}", kept))
        folds.append(f"zero-weights:{tree.name}:{int((~keep).sum())}")


def _fold_cast(graph, folds):
    for cast in [n for n in graph.node if n.op_type == "Cast"]:
        to = _attr(cast, "to").i
        producer = _producer(graph, cast.input[0])
        if to != onnx.TensorProto.FLOAT or producer is None or producer.op_type != "SVMClassifier":
            continue
        _rename_input(graph, cast.output[0], cast.input[0])
        graph.node.remove(cast)
        folds.append(f"cast:{cast.name}")


def _weighting(graph):
    """(member probabilities, weight, Mul node) per weighting node feeding the soft vote."""
    vote = next(n for n in graph.node if n.name == "soft_vote")
    terms = []
    for name in vote.input:
        mul = _producer(graph, name)
        if mul is None or mul.op_type != "Mul":
            return vote, None
        weight = _initializer(graph, mul.input[1])
        if weight is None or weight.size != 1:
            return vote, None
        terms.append((mul.input[0], float(weight.reshape(-1)[0]), mul))
    return vote, terms


def _fold_vote(graph, classes, folds):
    vote, terms = _weighting(graph)
    if not terms or len(terms) < 2:
        return
    # Forest weights into its leaves (probabilities linear in the leaf weights).
    folded = []
    for probs, weight, mul in terms:
        tree = _producer(graph, probs)
        post = _attr(tree, "post_transform") if tree is not None else None
        # Not with two classes: there ONNX Runtime may derive one class's score from the other's.
        if classes > 2 and tree is not None and tree.op_type == "TreeEnsembleClassifier" \
                and (post is None or post.s == b"NONE") and _attr(tree, "base_values") is None:
            leaf = np.array(_attr(tree, "class_weights").floats, dtype=np.float32) * np.float32(weight)
            _set_attr(tree, helper.make_attribute("class_weights", leaf.tolist()))
            folds.append(f"weight:{tree.name}")
            weight = 1.0
        folded.append((probs, weight, mul))
    for _, _, mul in folded:
        graph.node.remove(mul)
        _drop_initializer(graph, mul.input[1])
    identity = "vote_identity"
    graph.initializer.append(numpy_helper.from_array(np.eye(classes, dtype=np.float32), identity))
    # Start from a member with weight 1 when there is one (no operator for it), in the order
    # of the soft vote otherwise.
    folded.sort(key=lambda t: t[1] != 1.0)
    acc, weight0 = folded[0][0], folded[0][1]
    nodes = []
    rest = folded[1:]
    if weight0 != 1.0:
        # acc = weight0 * p0 + weight1 * p1 in one Gemm.
        (p1, w1, _) = rest[0]
        out = "vote_0" if len(rest) > 1 else s.OUTPUT_NAME
        nodes.append(helper.make_node("Gemm", [acc, identity, p1], [out], name="vote_0",
                                      alpha=weight0, beta=w1))
        acc, rest = out, rest[1:]
    for i, (p, w, _) in enumerate(rest, start=len(nodes)):
        out = f"vote_{i}" if i < len(folded) - 2 else s.OUTPUT_NAME
        nodes.append(helper.make_node("Gemm", [p, identity, acc], [out], name=f"vote_{i}", alpha=w, beta=1.0))
        acc = out
    position = list(graph.node).index(vote)
    graph.node.remove(vote)
    for offset, node in enumerate(nodes):
        graph.node.insert(position + offset, node)
    folds.append("vote")


def fold(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of an `export.to_onnx` model with the folds that apply; `asa.graph_folds` lists them."""
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    graph = folded.graph
    meta = {p.key: p.value for p in folded.metadata_props}
    if META_FOLDS in meta:
        return folded
    classes = len(json.loads(meta[s.META_CLASS_NAMES]))
    folds: list[str] = []
    _fold_tree_imputer(graph, folds)
    _fold_mask(graph, folds)
    _fold_cast(graph, folds)
    _fold_vote(graph, classes, folds)
    _fold_zero_leaf_weights(graph, classes, folds)
    folded.metadata_props.append(onnx.StringStringEntryProto(key=META_FOLDS, value=json.dumps(folds)))
    onnx.checker.check_model(folded)
    return folded


def agent_session(model):
    """An onnxruntime session with the agent's options (agent/src/decision/classifier.rs: one
    thread, no graph optimisation) for a model file's path or an `onnx.ModelProto`."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def check_same_outputs(original: onnx.ModelProto, folded: onnx.ModelProto, x: np.ndarray,
                       tolerance: float = 1e-6) -> float:
    """Largest absolute difference of the two models' probabilities on `x`; raises above `tolerance`."""
    x = np.asarray(x, dtype=np.float32)
    a = agent_session(original).run([s.OUTPUT_NAME], {s.INPUT_NAME: x})[0]
    b = agent_session(folded).run([s.OUTPUT_NAME], {s.INPUT_NAME: x})[0]
    diff = float(np.max(np.abs(a - b))) if len(x) else 0.0
    if not np.isfinite(b).all() or diff > tolerance:
        raise AssertionError(f"folded model differs by {diff} (tolerance {tolerance})")
    return diff


def probe_inputs(model: onnx.ModelProto, rows: int, seed: int = 0) -> np.ndarray:
    """Random rows around the values the model's thresholds test, a fifth of them NaN."""
    n = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    thresholds = np.concatenate([np.array(_attr(node, "nodes_values").floats, dtype=np.float32)
                                 for node in model.graph.node if node.op_type == "TreeEnsembleClassifier"]
                                or [np.zeros(1, dtype=np.float32)])
    rng = np.random.default_rng(seed)
    x = rng.choice(thresholds, size=(rows, n)) * rng.uniform(0.5, 1.5, size=(rows, n))
    x[rng.random((rows, n)) < 0.2] = np.nan
    return x.astype(np.float32)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asa_classifier.fold", description=__doc__.split("\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--out", type=Path, help="where to write the folded model (default: in place)")
    parser.add_argument("--check", type=Path, action="append", default=[],
                        help="a recording (Parquet) whose ticks must give the same probabilities (repeatable)")
    args = parser.parse_args(argv)
    original = onnx.load(str(args.model))
    meta = {p.key: p.value for p in original.metadata_props}
    if meta.get(s.META_MODEL_SCHEMA) != s.MODEL_SCHEMA:
        print(f"{args.model}: not an {s.MODEL_SCHEMA} model", file=sys.stderr)
        return 2
    if META_FOLDS in meta:
        print(f"{args.model}: already folded ({meta[META_FOLDS]})")
        return 0
    folded = fold(original)
    diff = check_same_outputs(original, folded, probe_inputs(original, 20000))
    print(f"probe rows: max |difference| {diff:.3g}")
    names = json.loads(meta[s.META_FEATURE_NAMES])
    for path in args.check:
        import pyarrow.parquet as pq
        table = pq.read_table(path)
        x = np.column_stack([table.column(n).to_numpy(zero_copy_only=False) if n in table.column_names
                             else np.full(table.num_rows, np.nan) for n in names])
        diff = check_same_outputs(original, folded, x)
        print(f"{path}: {table.num_rows} ticks, max |difference| {diff:.3g}")
    out = args.out or args.model
    onnx.save(folded, str(out))
    folds = json.loads({p.key: p.value for p in folded.metadata_props}[META_FOLDS])
    print(f"{out}: {len(original.graph.node)} -> {len(folded.graph.node)} operators ({', '.join(folds)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
