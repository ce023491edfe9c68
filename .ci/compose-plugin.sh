#!/usr/bin/env bash
# Installs the compose v2 plugin at $1 from the docker-compose package of the Debian release after
# the machine's own, fetched by apt through the machine's own archive (the URIs in
# /etc/apt/sources.list*), never through a host name written here. Always fetches and unpacks into a
# temporary directory, so this path runs on every CI run; the plugin is replaced only when missing or
# different. No pipeline ends a reader early (a SIGPIPE under pipefail failed this on a fresh machine).
set -euo pipefail
dest=${1:?usage: compose-plugin.sh DEST}
suite=${SVC_COMPOSE_SUITE:-trixie}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -E "$@"; fi; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The machine's Debian archive: the first URI of a source whose suites include its own codename
# (not -security/-updates), from deb822 .sources files or one-line sources.list entries.
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}")
uri=$(python3 - "$codename" <<'PY'
import glob, sys
code = sys.argv[1]
found = []
for path in sorted(glob.glob('/etc/apt/sources.list.d/*.sources')):
    for stanza in open(path, encoding='utf-8').read().split('\n\n'):
        fields = {}
        for line in stanza.splitlines():
            if line.startswith('#') or ':' not in line:
                continue
            k, v = line.split(':', 1)
            fields[k.strip().lower()] = v.strip()
        if fields.get('enabled', 'yes').lower() == 'no':
            continue
        if code in fields.get('suites', '').split() and 'deb' in fields.get('types', 'deb').split():
            found += fields.get('uris', '').split()
for path in ['/etc/apt/sources.list'] + sorted(glob.glob('/etc/apt/sources.list.d/*.list')):
    try:
        lines = open(path, encoding='utf-8').read().splitlines()
    except OSError:
        continue
    for line in lines:
        words = line.split('#', 1)[0].split()
        if len(words) >= 3 and words[0] == 'deb':
            rest = words[1:]
            if rest[0].startswith('['):
                while rest and not rest[0].endswith(']'):
                    rest = rest[1:]
                rest = rest[1:]
            if len(rest) >= 2 and rest[1] == code:
                found.append(rest[0])
if not found:
    sys.exit('no apt source for %s in /etc/apt/sources.list*' % code)
print(found[0])
PY
)
echo "compose plugin: docker-compose from $suite via $uri"

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/parts" "$tmp/pkg"
echo "deb [signed-by=$keyring] $uri $suite main" > "$tmp/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o "Dir::Etc::SourceParts=$tmp/parts"
          -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache"
          -o "Dir::State::status=/var/lib/dpkg/status" -o "APT::Sandbox::User=root"
          -o "Acquire::Languages=none" -o "Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false")
as_root apt-get "${apt_opts[@]}" -qq update
(cd "$tmp/pkg" && as_root apt-get "${apt_opts[@]}" -qq download docker-compose)
deb=$(find "$tmp/pkg" -name 'docker-compose_*.deb' -print -quit)
[ -n "$deb" ] || { echo "compose plugin: apt downloaded no docker-compose package" >&2; exit 1; }
dpkg-deb -x "$deb" "$tmp/x"
plugin="$tmp/x/usr/libexec/docker/cli-plugins/docker-compose"
[ -x "$plugin" ] || { echo "compose plugin: $(basename "$deb") has no cli-plugins/docker-compose" >&2; exit 1; }
"$plugin" version

if [ -f "$dest" ] && cmp -s "$plugin" "$dest"; then
  echo "compose plugin: $dest is already this build"
else
  as_root install -D -m 0755 "$plugin" "$dest"
  echo "compose plugin: installed $dest"
fi
