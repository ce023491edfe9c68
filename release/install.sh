#!/bin/sh
# svcd install script (spec "Sidecar program", "Install script"), served by the control plane at
# GET /install.sh:
#
#   curl -fsSL <server>/install.sh | sudo sh -s -- --server <server> --token <join token>
#
# Requires Linux, root and a container runtime. Detects amd64 or arm64, downloads
# <releases>/svcd-linux-<arch> (releases default to the server, whose /svcd-linux-* routes serve
# the builds), installs it to /usr/local/bin/svcd (SVC_BIN_DIR overrides) and runs
# `svcd install`, which writes /etc/svc/svcd.env and the systemd unit and starts it.
set -eu

server="${SVC_SERVER:-}"
releases="${SVC_RELEASES:-}"
token="${SVC_JOIN_TOKEN:-}"
zfs_pool="${SVC_ZFS_POOL:-}"
data="${SVC_DATA_DIR:-}"
bin_dir="${SVC_BIN_DIR:-/usr/local/bin}"

die() {
  echo "svcd install: $*" >&2
  exit 1
}
usage() {
  echo "usage: install.sh --server URL --token T [--releases URL] [--zfs-pool POOL] [--data DIR]" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
  --server | --releases | --token | --zfs-pool | --data)
    [ $# -ge 2 ] || usage
    case "$1" in
    --server) server="$2" ;;
    --releases) releases="$2" ;;
    --token) token="$2" ;;
    --zfs-pool) zfs_pool="$2" ;;
    --data) data="$2" ;;
    esac
    shift 2
    ;;
  --server=* | --releases=* | --token=* | --zfs-pool=* | --data=*)
    value="${1#*=}"
    case "$1" in
    --server=*) server="$value" ;;
    --releases=*) releases="$value" ;;
    --token=*) token="$value" ;;
    --zfs-pool=*) zfs_pool="$value" ;;
    --data=*) data="$value" ;;
    esac
    shift
    ;;
  -h | --help) usage ;;
  *)
    echo "svcd install: unknown argument '$1'" >&2
    usage
    ;;
  esac
done

[ "$(uname -s)" = Linux ] || die "svcd runs on Linux only (this is $(uname -s))"
[ "$(id -u)" = 0 ] || die "run as root (pipe to sudo sh)"
command -v docker >/dev/null 2>&1 || die "no container runtime: install Docker first (docker not on PATH)"
[ -n "$server" ] || die "--server (or SVC_SERVER) is required"
case "$server" in
http://* | https://*) ;;
*) die "--server must start with http:// or https://, got '$server'" ;;
esac
server="${server%/}"
[ -n "$token" ] || die "--token (or SVC_JOIN_TOKEN) is required: make one with svc host join-token"
releases="${releases:-$server}"
releases="${releases%/}"

case "$(uname -m)" in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) die "unsupported architecture $(uname -m): builds exist for amd64 and arm64" ;;
esac

tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
url="$releases/svcd-linux-$arch"
if command -v curl >/dev/null 2>&1; then
  curl -fsSL "$url" -o "$tmp" || die "download of $url failed"
elif command -v wget >/dev/null 2>&1; then
  wget -q "$url" -O "$tmp" || die "download of $url failed"
else
  die "neither curl nor wget is installed"
fi
mkdir -p "$bin_dir"
install -m 0755 "$tmp" "$bin_dir/svcd"
# The exec below replaces this shell, so the EXIT trap would never run: remove the download now.
rm -f "$tmp"
trap - EXIT
echo "svcd install: $("$bin_dir/svcd" version) installed to $bin_dir/svcd" >&2

set -- install --server "$server" --token "$token"
[ -z "$data" ] || set -- "$@" --data "$data"
[ -z "$zfs_pool" ] || set -- "$@" --zfs-pool "$zfs_pool"
exec "$bin_dir/svcd" "$@"
