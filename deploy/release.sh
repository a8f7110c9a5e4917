#!/usr/bin/env bash
# Packages the binaries "make release" built into one tarball per target and
# writes SHA256SUMS over the binaries and the tarballs:
#
#   deploy/release.sh VERSION DIR
#
# DIR holds {master,slave}-linux-{amd64,arm64,armv7}; this adds
#   DIR/redcrawl-VERSION-linux-ARCH.tar.gz   one directory redcrawl-VERSION-linux-ARCH/:
#       redcrawl-master, redcrawl-slave, config.example.yaml, README.md,
#       rules/README.md, docs/*.md, deploy/{systemd,redis,mariadb}/,
#       LICENSE (when the repository has one)
#   DIR/SHA256SUMS                           sha256sum format; check with
#                                            cd DIR && sha256sum -c SHA256SUMS
# The tarballs are reproducible: sorted names, owner 0:0, normalized modes,
# every mtime set to SOURCE_DATE_EPOCH (default: the last commit's time),
# gzip without a timestamp.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: deploy/release.sh VERSION DIR" >&2
  exit 2
fi
version=$1
out=$2
if ! [[ $version =~ ^[A-Za-z0-9][A-Za-z0-9._+-]*$ ]]; then
  echo "release: bad version \"$version\" (letters, digits, . _ + -)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)
fi
if ! [[ $SOURCE_DATE_EPOCH =~ ^[0-9]+$ ]]; then
  echo "release: bad SOURCE_DATE_EPOCH \"$SOURCE_DATE_EPOCH\"" >&2
  exit 2
fi

arches=(amd64 arm64 armv7)
for arch in "${arches[@]}"; do
  for cmd in master slave; do
    if [ ! -f "$out/$cmd-linux-$arch" ]; then
      echo "release: $out/$cmd-linux-$arch is missing (run make release)" >&2
      exit 1
    fi
  done
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
rm -f "$out"/redcrawl-*-linux-*.tar.gz "$out/SHA256SUMS"

tarballs=()
for arch in "${arches[@]}"; do
  name=redcrawl-$version-linux-$arch
  dir=$stage/$name
  mkdir -p "$dir/rules" "$dir/docs" "$dir/deploy"
  install -m 0755 "$out/master-linux-$arch" "$dir/redcrawl-master"
  install -m 0755 "$out/slave-linux-$arch" "$dir/redcrawl-slave"
  install -m 0644 "$root/config.yaml" "$dir/config.example.yaml"
  install -m 0644 "$root/README.md" "$dir/README.md"
  install -m 0644 "$root/rules/README.md" "$dir/rules/README.md"
  for doc in "$root"/docs/*.md; do
    install -m 0644 "$doc" "$dir/docs/$(basename "$doc")"
  done
  if [ -f "$root/LICENSE" ]; then install -m 0644 "$root/LICENSE" "$dir/LICENSE"; fi
  for sub in systemd redis mariadb; do
    cp -R "$root/deploy/$sub" "$dir/deploy/$sub"
  done
  # the files of a checkout may carry any umask; the tarball does not
  find "$dir" -type d -exec chmod 0755 {} +
  find "$dir" -type f ! -name 'redcrawl-master' ! -name 'redcrawl-slave' -exec chmod 0644 {} +
  tar -C "$stage" --sort=name --format=gnu --mtime="@$SOURCE_DATE_EPOCH" \
    --owner=0 --group=0 --numeric-owner -cf - "$name" | gzip -n -9 >"$out/$name.tar.gz"
  tarballs+=("$name.tar.gz")
  echo "release: $out/$name.tar.gz"
done

(
  cd "$out"
  files=()
  for arch in "${arches[@]}"; do files+=("master-linux-$arch" "slave-linux-$arch"); done
  sha256sum "${files[@]}" "${tarballs[@]}" >SHA256SUMS
)
echo "release: $out/SHA256SUMS"
