#!/bin/sh
# Puts ONNX Runtime's shared library, from the pinned `onnxruntime` wheel, into the
# project cache with its LICENSE and ThirdPartyNotices.txt, and prints the library's path
# (scx_gru, its tests and benches find it there when ORT_DYLIB_PATH is not set; `make install`
# and the Debian package ship the three files). Needs python3 with pip; installs nothing else.
set -eu
version=1.32.0
cache="${ASA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/asa}/onnxruntime-$version"
lib="$cache/libonnxruntime.so"
if [ ! -f "$lib" ] || [ ! -f "$cache/LICENSE" ] || [ ! -f "$cache/ThirdPartyNotices.txt" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "onnxruntime==$version"
    mkdir -p "$cache"
    python3 - "$tmp" "$cache" "$version" <<'PY'
import glob, os, sys, zipfile
tmp, cache, version = sys.argv[1:]
wheel = glob.glob(f"{tmp}/onnxruntime-{version}-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    for name, out in ((f"onnxruntime/capi/libonnxruntime.so.{version}", "libonnxruntime.so"),
                      ("onnxruntime/LICENSE", "LICENSE"),
                      ("onnxruntime/ThirdPartyNotices.txt", "ThirdPartyNotices.txt")):
        with open(f"{cache}/{out}.part", "wb") as f:
            f.write(z.read(name))
        os.replace(f"{cache}/{out}.part", f"{cache}/{out}")
PY
fi
echo "$lib"
