#!/bin/sh
# libero-subset.sh — the few LIBERO-Object files a physics-only libero_rl job
# needs, for the GPU bundle (`make CUDA=1 gpu-bundle`: the device tool carries
# 64 MiB in all and build/libero-data is 109 MB, almost all of it the render
# meshes and textures of scene_full.xml).
#
#   deploy/libero-subset.sh DATA OUT TASK...
#
# Copies DATA/manifest.json and, for each task index, its task.json,
# init_states.f64 and scene_phys.xml (the env role's scene; the GIFs need
# scene_full.xml, so a job on the subset sets eval.gif_episodes_per_task=0),
# and every file scene_phys.xml names (the Panda arm's and gripper's collision
# meshes, ~0.7 MB), at the same relative paths, so OUT works as env.data_dir.
# Fails naming what is missing.
set -eu
data=${1:?usage: libero-subset.sh DATA OUT TASK...}
out=${2:?usage: libero-subset.sh DATA OUT TASK...}
shift 2
[ -f "$data/manifest.json" ] || { echo "libero-subset: $data/manifest.json missing (make libero-data)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
cp "$data/manifest.json" "$out/"
for t in "$@"; do
    d=libero_object/$(printf 'task_%02d' "$t")
    mkdir -p "$out/$d"
    for f in task.json init_states.f64 scene_phys.xml; do
        [ -f "$data/$d/$f" ] || { echo "libero-subset: $data/$d/$f missing" >&2; exit 1; }
        cp "$data/$d/$f" "$out/$d/"
    done
    # the files the scene names, relative to the scene's folder
    grep -o 'file="[^"]*"' "$data/$d/scene_phys.xml" | sed 's/^file="//; s/"$//' | sort -u | while read -r rel; do
        src=$data/$d/$rel
        [ -f "$src" ] || { echo "libero-subset: $src (named by $d/scene_phys.xml) missing" >&2; exit 1; }
        dst=$out/$d/$rel
        mkdir -p "$(dirname "$dst")"
        [ -f "$dst" ] || cp "$src" "$dst"
    done
done
kb=$(du -sk "$out" | cut -f1)
echo "libero-subset: $out: task(s) $*, $kb KiB"
