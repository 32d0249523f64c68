#!/usr/bin/env bash
# Installs, uninstalls or lists ASA's files: every line of packaging/files.txt, the one list
# `make install`, `make uninstall` and packaging/build-deb.sh share.
#
#   packaging/install.sh install|uninstall|list
#
# Settings (environment; the Makefile passes its variables of the same names):
#   PREFIX      /usr/local                  bindir, libdir, datadir and unitdir are under it
#   DESTDIR     (none)                      a staging root put before every destination
#   SYSCONFDIR  /etc                        where asa.toml goes (the agent reads /etc/asa)
#   UNITDIR     $PREFIX/lib/systemd/system
#   DBUSDIR     /usr/share/dbus-1/system.d
#   POLKITDIR   /usr/share/polkit-1/actions
#   ASA_BIN     target/release/asa          the `asa` binary to install
#   ASA_ORT     the project cache's         the folder with ONNX Runtime's libonnxruntime.so,
#               onnxruntime-<version>/      LICENSE and ThirdPartyNotices.txt (the version
#                                           gru_expert/setup_ort.sh pins and puts there)
#   STRIP       1                           strip the installed binary (0: keep its symbols)
set -euo pipefail
workspace=$(cd "$(dirname "$0")/.." && pwd)
list="$workspace/packaging/files.txt"

PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
SYSCONFDIR=${SYSCONFDIR:-/etc}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
DBUSDIR=${DBUSDIR:-/usr/share/dbus-1/system.d}
POLKITDIR=${POLKITDIR:-/usr/share/polkit-1/actions}
ASA_BIN=${ASA_BIN:-target/release/asa}
STRIP=${STRIP:-1}
ort_version=$(sed -n 's/^version=//p' "$workspace/gru_expert/setup_ort.sh")
ASA_ORT=${ASA_ORT:-${ASA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/asa}/onnxruntime-$ort_version}
bindir=$PREFIX/bin
libdir=$PREFIX/lib
datadir=$PREFIX/share

die() { echo "packaging/install.sh: $*" >&2; exit 1; }

# A destination of files.txt with its placeholders filled (without DESTDIR).
destination() {
  local d=$1
  d=${d//\{bindir\}/$bindir}
  d=${d//\{libdir\}/$libdir}
  d=${d//\{datadir\}/$datadir}
  d=${d//\{sysconfdir\}/$SYSCONFDIR}
  d=${d//\{unitdir\}/$UNITDIR}
  d=${d//\{dbusdir\}/$DBUSDIR}
  d=${d//\{polkitdir\}/$POLKITDIR}
  [[ $d == /* && $d != *'{'* ]] || die "files.txt: destination $1 is not an absolute path with known placeholders"
  printf '%s' "$d"
}

# A source of files.txt as a path (`asa` is the built binary, `onnxruntime/F` the file F of
# $ASA_ORT).
source_path() {
  if [[ $1 == asa ]]; then
    case $ASA_BIN in /*) printf '%s' "$ASA_BIN" ;; *) printf '%s' "$workspace/$ASA_BIN" ;; esac
  elif [[ $1 == onnxruntime/* ]]; then
    printf '%s' "$ASA_ORT/${1#onnxruntime/}"
  else
    printf '%s' "$workspace/$1"
  fi
}

# Calls `$1 MODE SOURCE DESTINATION FLAG` for every line of files.txt.
each_file() {
  local mode src dest flag
  while read -r mode src dest flag; do
    [[ -z $mode || $mode == \#* ]] && continue
    "$1" "$mode" "$(source_path "$src")" "$(destination "$dest")" "${flag:-}"
  done <"$list"
}

list_one() { echo "$DESTDIR$3${4:+ $4}"; }

check_source() {
  [[ -f $2 ]] && return
  if [[ $2 == "$(source_path asa)" ]]; then
    die "$2 is missing: build it first (as your user: cargo build --release -p asa-agent), or name another binary with ASA_BIN="
  fi
  if [[ $2 == "$ASA_ORT"/* ]]; then
    die "$2 is missing: fetch ONNX Runtime $ort_version first (as your user: gru_expert/setup_ort.sh), or name its folder with ASA_ORT="
  fi
  die "$2 is missing (named in packaging/files.txt): restore it from git"
}

install_one() {
  local mode=$1 src=$2 dest=$DESTDIR$3 flag=$4
  install -d -m 0755 "$(dirname "$dest")"
  if [[ $flag == config && -e $dest ]]; then
    cmp -s "$src" "$dest" || echo "kept $dest (changed here; the shipped one is $src)"
    return
  fi
  if [[ $flag == unit ]]; then
    local tmp
    tmp=$(mktemp)
    sed -E "s#^ExecStart=[^ ]*/asa( |\$)#ExecStart=$bindir/asa\1#" "$src" >"$tmp"
    grep -qE "^ExecStart=$bindir/asa( |\$)" "$tmp" || { rm -f "$tmp"; die "$src has no ExecStart=.../asa line to point at $bindir/asa"; }
    install -m "$mode" "$tmp" "$dest"
    rm -f "$tmp"
  else
    install -m "$mode" "$src" "$dest"
  fi
  if [[ $mode == 0755 && $STRIP != 0 ]]; then
    command -v strip >/dev/null || die "strip is missing: install binutils, or keep the symbols with STRIP=0"
    strip "$dest"
  fi
  echo "installed $dest"
}

uninstall_one() {
  local src=$2 dest=$DESTDIR$3 flag=$4
  [[ -e $dest ]] || return 0
  if [[ $flag == config ]] && ! cmp -s "$src" "$dest"; then
    echo "kept $dest (changed here)"
    return
  fi
  rm -f "$dest"
  echo "removed $dest"
}

case ${1:-} in
  install)
    each_file check_source
    each_file install_one
    ;;
  uninstall)
    each_file uninstall_one
    # ASA's own folders, when empty; never the shared ones (bin, dbus-1, polkit-1, systemd).
    for dir in "$datadir/asa/mapping" "$datadir/asa/layers" "$datadir/asa" \
               "$datadir/doc/asa/onnxruntime" "$datadir/doc/asa" "$libdir/asa" "$SYSCONFDIR/asa"; do
      rmdir "$DESTDIR$dir" 2>/dev/null || true
    done
    ;;
  list)
    # One line a file: the destination (with DESTDIR), then its flag when it has one.
    each_file list_one
    ;;
  *)
    die "usage: packaging/install.sh install|uninstall|list (settings: see the script's head)"
    ;;
esac
