#!/bin/sh
# Puts ONNX Runtime's shared library, from the pinned `onnxruntime` wheel, into the
# project cache and prints its path (scx_gru, its tests and benches find it there
# when ORT_DYLIB_PATH is not set). Needs python3 with pip; installs nothing else.
set -eu
version=1.32.0
cache="${ASA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/asa}/onnxruntime-$version"
lib="$cache/libonnxruntime.so"
if [ ! -f "$lib" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "onnxruntime==$version"
    mkdir -p "$cache"
    python3 - "$tmp" "$lib.part" "$version" <<'PY'
import glob, sys, zipfile
tmp, out, version = sys.argv[1:]
wheel = glob.glob(f"{tmp}/onnxruntime-{version}-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = f"onnxruntime/capi/libonnxruntime.so.{version}"
    with open(out, "wb") as f:
        f.write(z.read(name))
PY
    mv "$lib.part" "$lib"
fi
echo "$lib"
