#!/usr/bin/env bash
# Installs the classifier's pinned requirements into classifier/.venv (idempotent: a venv whose
# recorded requirements hash matches requirements.txt is left alone).
# Prints the path of libonnxruntime.so for ORT_DYLIB_PATH on its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
python="${PYTHON:-python3}"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    if [[ ! -x "$venv/bin/python" ]]; then
        "$python" -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
    echo "$want" >"$stamp"
fi
# The package's folder without importing it: importing onnxruntime loads the library, which
# (1.29 and later, unless ORT_DISABLE_TELEMETRY=1) starts its telemetry.
"$venv/bin/python" - <<'PY'
import glob, importlib.util, os
package = importlib.util.find_spec("onnxruntime").submodule_search_locations[0]
libs = sorted(glob.glob(os.path.join(package, "capi", "libonnxruntime.so*")))
print(libs[-1])
PY
