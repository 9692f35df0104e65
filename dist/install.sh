#!/bin/sh
# Install scx_nimble as a systemd service: the binary (cargo install
# --path .) into PREFIX/bin (default /usr/local), the unit into
# /etc/systemd/system, the flags file into /etc/default (kept if present).
#   dist/install.sh [--prefix DIR] [--enable]
# --enable also runs `systemctl enable --now scx_nimble`.
set -eu
cd "$(dirname "$0")/.."
prefix=/usr/local enable=0
while [ $# -gt 0 ]; do
	case $1 in
	--prefix) prefix=$2; shift 2 ;;
	--enable) enable=1; shift ;;
	*) echo "install.sh: unknown option $1 (options: --prefix DIR, --enable)" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root (it writes /etc)" >&2; exit 1; }
BPF_CLANG=${BPF_CLANG:-clang-19} cargo install --locked --path . --root "$prefix" --bin scx_nimble
sed "s|/usr/local/bin/scx_nimble|$prefix/bin/scx_nimble|" dist/scx_nimble.service \
	>/etc/systemd/system/scx_nimble.service
[ -e /etc/default/scx_nimble ] || install -m 644 dist/scx_nimble.default /etc/default/scx_nimble
systemctl daemon-reload 2>/dev/null || true
echo "installed $prefix/bin/scx_nimble and scx_nimble.service; flags: /etc/default/scx_nimble"
if [ $enable = 1 ]; then systemctl enable --now scx_nimble; else echo "start it: systemctl enable --now scx_nimble"; fi
