#!/bin/sh
# apt-install PACKAGE...: apt-get install the packages, through the build host's index settings
# when the build passes them as BuildKit secrets (aptsources, aptconf: see the Dockerfile's
# header), else through Debian's defaults. Leaves no package lists and no settings behind.
set -eu
opts=""
tmp=""
if [ -s /run/secrets/aptconf ]; then
  opts="-c /run/secrets/aptconf"
fi
if [ -s /run/secrets/aptsources ]; then
  tmp="$(mktemp -d)"
  ext=list
  if grep -q '^Types:' /run/secrets/aptsources; then ext=sources; fi
  cp /run/secrets/aptsources "$tmp/host.$ext"
  opts="$opts -o Dir::Etc::SourceParts=$tmp -o Dir::Etc::SourceList=$tmp/none.list"
fi
# shellcheck disable=SC2086  # $opts holds several words on purpose
apt-get $opts update
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get $opts install -y --no-install-recommends "$@"
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
if [ -n "$tmp" ]; then rm -rf "$tmp"; fi
