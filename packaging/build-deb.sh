#!/usr/bin/env bash
# Builds ASA's Debian package from the files `make install` installs (packaging/files.txt,
# staged by packaging/install.sh with PREFIX=/usr): asa in /usr/bin, the unit, /etc/asa/asa.toml
# (a conffile), the bus policy, the default models and tables in /usr/share/asa, ONNX Runtime in
# /usr/lib/asa (its licence in /usr/share/doc/asa/onnxruntime).
#
#   packaging/build-deb.sh [--binary PATH] [--out DIR] [--compression xz|gzip|none]
#
#   --binary       the asa binary to package (default target/release/asa: build it first with
#                  `cargo build --release -p asa-agent`); it is stripped in the package
#   --out          where the .deb goes (default target/debian); its name is printed
#   --compression  dpkg-deb's (default xz; the tests use none: xz takes half a minute on a
#                  debug binary)
#
# Needs dpkg-deb, dpkg-shlibdeps (dpkg-dev) and strip (binutils); no cargo-deb: the package is
# the staged tree, so it holds exactly what `make install` installs (ONNX Runtime from $ASA_ORT,
# default the project cache: run gru_expert/setup_ort.sh first). Depends: what dpkg-shlibdeps
# finds the binary and ONNX Runtime linked against (libc6, libelf1, zlib1g, libgcc-s1,
# libstdc++6). Not in the package: the scx experts (a distribution's scx package or
# lab/setup.sh); `asa doctor` says what is missing.
set -euo pipefail
workspace=$(cd "$(dirname "$0")/.." && pwd)
cd "$workspace"

binary=target/release/asa
out=target/debian
compression=xz
while (($#)); do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --compression) compression=$2; shift 2 ;;
    *) echo "packaging/build-deb.sh: unknown argument $1 (see the script's head)" >&2; exit 2 ;;
  esac
done
for tool in dpkg-deb dpkg-shlibdeps strip; do
  command -v "$tool" >/dev/null || {
    echo "packaging/build-deb.sh: $tool is missing: apt-get install dpkg-dev binutils" >&2
    exit 1
  }
done
[[ -x $binary ]] || {
  echo "packaging/build-deb.sh: $binary is missing: build it with \`cargo build --release -p asa-agent\`, or name one with --binary" >&2
  exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# dpkg-shlibdeps wants the package's tree at debian/<package> beside debian/control.
root=$work/debian/asa
DESTDIR=$root PREFIX=/usr UNITDIR=/usr/lib/systemd/system ASA_BIN=$(realpath "$binary") \
  packaging/install.sh install >/dev/null

version=$("$root/usr/bin/asa" --version | awk '{print $2}')
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] || {
  echo "packaging/build-deb.sh: \`asa --version\` printed no version: $version" >&2
  exit 1
}
arch=$(dpkg --print-architecture)
printf 'Source: asa\n\nPackage: asa\nArchitecture: any\n' >"$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O -e debian/asa/usr/bin/asa \
  -e debian/asa/usr/lib/asa/libonnxruntime.so 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')
[[ -n $depends ]] || { echo "packaging/build-deb.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)

mkdir -p "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<EOF
Package: asa
Version: $version
Architecture: $arch
Maintainer: ASA developers <asa@example.invalid>
Installed-Size: $size
Depends: $depends
Suggests: dbus, polkitd | policykit-1
Section: admin
Priority: optional
Homepage: https://example.invalid/asa
Description: adaptive scheduling agent for Linux sched_ext
 ASA samples the machine, recognises its workload with an ONNX classifier and
 switches to the sched_ext scheduler (an expert: scx_cosmos, scx_bpfland,
 scx_lavd, ...) that serves it best, falling back to the kernel's EEVDF.
 It ships ONNX Runtime; it needs a kernel with sched_ext and the scx schedulers.
EOF
# Configuration files: dpkg keeps an admin's edits across upgrades.
PREFIX=/usr packaging/install.sh list | awk '$2 == "config" {print $1}' >"$root/DEBIAN/conffiles"
# The unit is installed, not enabled: switching a machine's scheduler is the admin's call
# (`systemctl enable --now asa`). On removal the agent is stopped, which returns to EEVDF.
cat >"$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
EOF
cat >"$root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop asa.service || true
fi
EOF
cat >"$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"

mkdir -p "$out"
deb="$out/asa_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Z"$compression" --build "$root" "$deb" >/dev/null
echo "$deb"
