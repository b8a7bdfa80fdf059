#!/usr/bin/env bash
# Copies the third-party test data the suite uses from ../shared/testdata into tests/data, with
# its licences, so that a clone alone passes the tests. Run again when shared/testdata changes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-$root/../shared/testdata}
dst=$root/tests/data
[ -d "$src" ] || { echo "no test data at $src" >&2; exit 1; }
rm -rf "$dst/aws-sigv4" "$dst/ec2-instance-types" "$dst/ec2-model" "$dst/ec2-protocol" \
  "$dst/ec2-xml-responses"
mkdir -p "$dst"
for d in aws-sigv4 ec2-instance-types ec2-model ec2-protocol ec2-xml-responses; do
  cp -r "$src/$d" "$dst/$d"
done
cp "$src/BOTOCORE-LICENSE.txt" "$src/BOTOCORE-NOTICE.txt" "$dst/"
