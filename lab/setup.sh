#!/usr/bin/env bash
# Installs everything ASA's demo and tests need on a fresh Debian 12 (bookworm) x86_64 machine.
# Idempotent: every step checks first and does nothing when its result is already there.
#   - Debian packages: qemu 8.1 or newer (the lab VM; from bookworm-backports on Debian 12,
#     whose own qemu 7.2 starves one vCPU under instruction counting), busybox-static (the
#     guest's userland), clang-19 and libelf/zlib/pkg-config (BPF builds), bpftool, stress-ng
#     (workloads in the guest), xz-utils (the guest kernel modules are xz-compressed),
#     dbus-daemon (the D-Bus tests' private bus), dpkg-dev and binutils (the Debian package the
#     tests build: dpkg-shlibdeps, strip);
#   - the Rust toolchain check (rust-version of the workspace);
#   - the scx experts named in experts/catalogue.toml, `cargo install --locked` at their exact
#     versions into the project cache ($ASA_CACHE, default ~/.cache/asa/experts/<crate>-<ver>);
#   - scxctl (scx_loader's D-Bus client, for the D-Bus tests) at the version Cargo.toml pins,
#     likewise into ~/.cache/asa/scxctl/scxctl-<ver>;
#   - ONNX Runtime's library (pinned wheel) into the cache, and classifier/.venv (pip, pinned).
# The sched_ext kernel is fetched by `asa-lab kernel` (the Makefile runs it after the build).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1msetup:\033[0m %s\n' "$*"; }

packages=(busybox-static cpio clang-19 llvm-19 libelf-dev zlib1g-dev pkg-config
          bpftool stress-ng make debootstrap e2fsprogs xz-utils dbus-daemon dpkg-dev binutils)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing Debian packages: ${missing[*]}; run this script as root (apt-get install)" >&2
    exit 1
  fi
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  log "Debian packages present"
fi

# qemu 8.1 or newer. Under instruction counting (ASA_LAB_ICOUNT) qemu 7.2's single-threaded TCG
# gives the whole budget up to the next timer to the first vCPU; while that vCPU keeps arming
# timers (I/O completing every 100 µs) the other one does not run, for up to a second at a time
# (results/2026-11-26-qemu72-icount-starves-a-vcpu). qemu 8.1 splits the budget
# between the vCPUs. Debian 12 has qemu 10 in bookworm-backports.
qemu_version() {
  qemu-system-x86_64 --version 2>/dev/null | sed -n '1s/^QEMU emulator version \([0-9.]*\).*/\1/p'
}
qemu_ok() {
  local v
  v=$(qemu_version)
  [[ -n "$v" && "$(printf '%s\n%s\n' 8.1 "$v" | sort -V | head -1)" == 8.1 ]]
}
if qemu_ok; then
  log "qemu $(qemu_version) present"
else
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: qemu 8.1 or newer is missing; run this script as root (apt-get install)" >&2
    exit 1
  fi
  suite=
  if grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
    suite=bookworm-backports
    src=/etc/apt/sources.list.d/bookworm-backports.sources
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      log "adding $suite to apt's sources ($src)"
      printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' \
        'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' > "$src"
    fi
  fi
  log "installing qemu${suite:+ from $suite}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${suite:+-t "$suite"} qemu-system-x86 >/dev/null
  if ! qemu_ok; then
    echo "setup: qemu 8.1 or newer is still missing (found: $(qemu_version || true)): install a" \
      "newer one (Debian 12: bookworm-backports)" >&2
    exit 1
  fi
fi

if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found: install Rust with rustup (rust-version 1.91 or newer)" >&2
  exit 1
fi
need=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -1)
have=$(rustc --version | awk '{print $2}')
if [[ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]]; then
  echo "setup: rustc $have is older than the workspace's rust-version $need: rustup update" >&2
  exit 1
fi

cache="${ASA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/asa}"
export PATH="/usr/lib/llvm-19/bin:$PATH"
# `cargo install --locked` of CRATE at VERSION into ROOT unless ROOT/bin/BINARY is there; every
# build shares one target dir, so common dependencies are built once.
install_crate() {
  local root=$1 crate=$2 version=$3 binary=$4 start
  if [[ -x "$root/bin/$binary" ]]; then
    log "$crate $version present"
    return
  fi
  log "building $crate $version (a few minutes; shared target dir in $cache/experts/target)"
  start=$SECONDS
  CARGO_TARGET_DIR="$cache/experts/target" \
    cargo install --quiet --locked --root "$root" "$crate@$version"
  log "$crate $version built in $((SECONDS - start)) s"
}

# crate version binary, for every expert from crates.io in the catalogue.
python3 - <<'PY' > /tmp/asa-experts.$$
import tomllib
cat = tomllib.load(open("experts/catalogue.toml", "rb"))
for e in cat["expert"]:
    if e["kind"] == "scx-crate":
        print(e["crate"], e["version"], e["binary"])
PY
while read -r crate version binary; do
  install_crate "$cache/experts/$crate-$version" "$crate" "$version" "$binary"
done < /tmp/asa-experts.$$
rm -f /tmp/asa-experts.$$

# scxctl, scx_loader's D-Bus client, which the D-Bus tests drive asa with: the version pinned in
# Cargo.toml ([workspace.metadata.asa.tools]), into $cache/scxctl/scxctl-<version>.
scxctl_version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml", "rb"))["workspace"]["metadata"]["asa"]["tools"]["scxctl"])')
install_crate "$cache/scxctl/scxctl-$scxctl_version" scxctl "$scxctl_version" scxctl

# ONNX Runtime for scx_gru and the agent's classifier (one shared library in the cache), and the
# classifier's Python environment (training, export, pytest) in classifier/.venv.
log "ONNX Runtime: $(gru_expert/setup_ort.sh)"
start=$SECONDS
classifier/setup.sh >/dev/null
log "classifier venv ready ($((SECONDS - start)) s)"
log "done"
