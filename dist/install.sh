#!/bin/sh
# Install scx_nimble as a systemd service: the binary (cargo install
# --path .) into PREFIX/bin (default /usr/local), the unit into
# /etc/systemd/system, the flags file into /etc/default (kept if present).
#   dist/install.sh [--prefix /ABS/DIR] [--enable]
# --enable also runs `systemctl enable --now scx_nimble`. Run it as root
# (sudo -E keeps a user's cargo on PATH); it builds in a temporary target
# directory, so the checkout's own target/ stays the user's.
set -eu
cd "$(dirname "$0")/.."
prefix=/usr/local enable=0
die2() { echo "install.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--prefix) [ $# -ge 2 ] || die2 "--prefix needs a directory"; prefix=$2; shift 2 ;;
	--enable) enable=1; shift ;;
	*) die2 "unknown option $1 (options: --prefix DIR, --enable)" ;;
	esac
done
case $prefix in
/*) ;;
*) die2 "--prefix must be an absolute path (systemd's ExecStart needs one): $prefix" ;;
esac
case $prefix in
*[!A-Za-z0-9/._+-]*) die2 "--prefix has characters a unit file path should not: $prefix" ;;
esac
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root (it writes /etc)" >&2; exit 1; }
command -v cargo >/dev/null || { echo "install.sh: cargo not on PATH (sudo -E, or vm/nimble-vm deps)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
BPF_CLANG=${BPF_CLANG:-clang-19} cargo install --locked --path . --root "$prefix" \
	--target-dir "$tmp" --bin scx_nimble
sed "s|/usr/local/bin/scx_nimble|$prefix/bin/scx_nimble|" dist/scx_nimble.service \
	>/etc/systemd/system/scx_nimble.service
[ -e /etc/default/scx_nimble ] || install -m 644 dist/scx_nimble.default /etc/default/scx_nimble
systemctl daemon-reload 2>/dev/null || true
echo "installed $prefix/bin/scx_nimble and scx_nimble.service; flags: /etc/default/scx_nimble"
if [ $enable = 1 ]; then systemctl enable --now scx_nimble; else echo "start it: systemctl enable --now scx_nimble"; fi
