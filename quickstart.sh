#!/usr/bin/env bash
# Install imgwarm (in .venv), optimize a folder of photos on the embedded default (variants in
# ./var/origin, manifests in ./var/manifest; no Redis, no S3), then warm the cache tiers from
# them (every variant in ./var/cache/nvme, the hottest in RAM, thumbnails first, at
# /dev/shm/imgwarm-<uid>/ram), and
# write a gallery page of them with their picture tags, its pages file and the nginx config
# that serves it all (./var/gallery); `imgwarm serve` then shows it in a browser.
#   ./quickstart.sh             sample photos that imgwarm synthesizes itself
#   ./quickstart.sh ~/Pictures  your own photos (the folder is searched recursively)
set -euo pipefail
umask 022  # the roots it makes are checked: not writable by group or others
source_dir=${1:-}
if [ -n "$source_dir" ]; then
    source_dir=$(cd "$source_dir" && pwd)
fi
cd "$(dirname "$0")"
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
if [ -z "$source_dir" ]; then
    source_dir=var/samples
    echo "No folder given: making sample photos in $source_dir"
    .venv/bin/imgwarm samples "$source_dir" >/dev/null
fi
status=0
.venv/bin/imgwarm optimize "$source_dir" || status=$?
echo
echo "Warming the cache tiers:"
.venv/bin/imgwarm warm || status=$?
echo
echo "Collecting variants no manifest names any more (a settings change leaves them; they go"
echo "after the 7-day grace period, while cached HTML may still name them):"
.venv/bin/imgwarm gc || status=$?
echo
echo "Writing a gallery of them, its pages file and the nginx config that serves it all (RAM"
echo "tier, then NVMe, then the origin; the page with its hero's preload Link):"
mkdir -p var/log
check=()
if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then
    check=(--check)  # nginx -t on it first
fi
PATH=$PATH:/usr/sbin .venv/bin/imgwarm gallery --out var/gallery --listen 127.0.0.1:8080 \
    --access-log "$(pwd)/var/log/access.log" "${check[@]}" || status=$?
echo
echo "Variants are in $(pwd)/var/origin (the path under it is the URL path); the cache tiers"
echo "in $(pwd)/var/cache/nvme and /dev/shm/imgwarm-$(id -u)/ram (RAM); the gallery in $(pwd)/var/gallery."
if [ ${#check[@]} -gt 0 ]; then
    echo "See it in a browser now:   .venv/bin/imgwarm serve     (nginx on a free port; Ctrl-C stops)"
fi
echo "Or serve it from your nginx: in its http {}, after include mime.types;, add"
echo "    include $(pwd)/var/gallery/nginx.conf;"
echo "then open http://127.0.0.1:8080/; warm from its log with"
echo "    IMGWARM_ACCESS_LOGS=$(pwd)/var/log/access.log .venv/bin/imgwarm warm"
echo "One image's tag:  .venv/bin/imgwarm picture <source file>    All options: .venv/bin/imgwarm --help"
echo "Make each photo as it lands in a folder (and take removed ones down):"
echo "    .venv/bin/imgwarm watch FOLDER     (bucket events: imgwarm listen; docs/uploads.md)"
echo "Take a photo down everywhere: .venv/bin/imgwarm delete <source file>  (then imgwarm warm"
echo "    on each cache server removes it from the tiers: nginx answers 404)"
echo "Each file just good enough (SSIMULACRA2 75, slower): .venv/bin/imgwarm optimize FOLDER \\"
echo "    --webp-quality auto --jpeg-quality auto --report-quality"
echo "Widths cut to every screen, laptops too (at most 1.5x the pixels a slot needs; against the"
echo "    default widths about 1.9x the time and 2.2x the storage):"
echo "    .venv/bin/imgwarm optimize FOLDER --width-step-bytes 20K"
exit $status
