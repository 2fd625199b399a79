#!/usr/bin/env bash
# Issue 24 on one H200: the frontier families' GPU tests, a timing probe, three Arena v6 rows reproduced and our
# <= 1,000-parameter candidates, each stage one device call of at most 10 minutes (about 12 minutes of GPU in all,
# benchmarks/arena_plan.py). Run from the repository root on the GPU machine with these carried (git-ignored):
#   .ref/opendpd-2.4.2-arena/opendpd/arena_assets   (4.2 MB: the Arena capture, frozen PA, calibration, leaderboard)
#   .ref/opendpd-2.4.2-arena/datasets/DPA_200MHz    (1.9 MB: the tiny protocol of the GPU tests)
# Usage: bash benchmarks/arena_gpu.sh test|probe|reproduce|candidates|pn|gain|train|train2|aug|aug-oob|gain3p|gain3p-aug|long3p|woob|woob2|woob-lr|woob-cos|long|dpa160|dpa160-2p2|dpa160-rms|dpa160-aligned|all
# Results go to $OUT/<stage>/ (leaderboard.md/.html/.csv/.json, trials.csv); the workspace is workspace/arena-gpu
# (git-ignored: kept between calls while the machine stays warm, so a stage cut by its time limit resumes when run
# again: finished sweeps are reused).
set -euo pipefail
STAGE=${1:-all}
OUT=${OUT:-/tmp/arena-gpu-out}
WS=${ARENA_WS:-workspace/arena-gpu}
PY=${PY:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export DPD_DESKTOP_DATASETS=${DPD_DESKTOP_DATASETS:-$PWD/.ref/opendpd-2.4.2-arena/datasets}
REPRO=DeltaGRU-14,TRes-DeltaGRU-15,TCN-17
mkdir -p "$OUT"
test -f .ref/opendpd-2.4.2-arena/opendpd/arena_assets/calibration-v6-apa-b.json || {
  echo "missing .ref/opendpd-2.4.2-arena/opendpd/arena_assets (carry it; locally: make arena-data)" >&2; exit 2; }

arena() {  # arena PROTOCOL OUTNAME [options]: one arena run, its leaderboard into $OUT/OUTNAME
  local proto=$1 name=$2; shift 2
  local t0=$SECONDS
  timeout 570 $PY -m dpd_desktop --workspace "$WS" arena "$proto" --device cuda --kernel fast \
    --out "$OUT/$name" "$@" | tail -n 60 || echo "arena $name: stopped or failed (exit $?); run the stage again to resume"
  echo "arena $name: $((SECONDS - t0)) s wall"
}

case "$STAGE" in
  test)   # the GPU tests of issue 24 (~3 min): graph == eager bitwise, gradients vs float64, chunks, groups
    $PY -m pytest -q tests/gpu/test_arena_cuda.py 2>&1 | tail -n 15
    ;;
  probe)  # 3 epochs of one model (3 seeds as a group), then the projection of the later stages (~1.5 min)
    arena arena-v6 probe --models DeltaGRU-14 --epochs 3
    $PY benchmarks/arena_plan.py arena-v6 --models $REPRO --probe "$WS"
    $PY benchmarks/arena_plan.py benchmarks/arena-v6-candidates.toml --probe "$WS"
    ;;
  reproduce)   # three Arena v6 rows from our training, 240 epochs x 3 seeds each (~4-5 min)
    arena arena-v6 reproduce --models $REPRO
    ;;
  candidates)  # our <= 1,000-parameter candidates with the new training options (~3 min)
    arena benchmarks/arena-v6-candidates.toml candidates
    ;;
  pn)  # phase-normalized and gain-head GRUs at <= 1,000 parameters (~5 min)
    arena benchmarks/arena-v6-pn.toml pn --models PN-GRU-14,PN-GRU2-12,GRU-gain-14
    ;;
  gain)  # the gain-head GRUs with taps (~3 min)
    arena benchmarks/arena-v6-pn.toml gain --models GRU-gain3-13,GRU-gain5-12
    ;;
  train)  # GRU-gain3-13: the out-of-band loss term (w = 10, 30; 240 epochs) beside 480 epochs, two processes (~8 min)
    ARENA_WS=workspace/arena-long bash "$0" long > "$OUT/long.log" 2>&1 &
    arena benchmarks/arena-v6-train.toml train --models GRU-gain3-13-oob10,GRU-gain3-13-oob30
    wait; cat "$OUT/long.log"
    ;;
  train2)  # DPA_160MHz in 2.2.1's convention beside GRU-gain3-13 with the Hann-windowed out-of-band term and GRU-gain3p-13 (~9 min)
    ARENA_WS=workspace/arena-dpa160 bash "$0" dpa160-2p2 > "$OUT/dpa160-2p2.log" 2>&1 &
    arena benchmarks/arena-v6-train.toml train2 --models GRU-gain3p-13
    wait; cat "$OUT/dpa160-2p2.log"
    ;;
  aug)  # the phase augmentation: GRU-gain3-13 with it, with it and the Hann out-of-band term (w = 3), GRU-gain3p-13
        # without it: three processes beside the augmentation's GPU tests (~8 min)
    $PY -m pytest -q tests/gpu/test_arena_cuda.py tests/gpu/test_group_training_cuda.py -k "augment or phase" \
      > "$OUT/gpu-tests-aug.log" 2>&1 &
    ARENA_WS=workspace/arena-aug-oob bash "$0" aug-oob > "$OUT/aug-oob.log" 2>&1 &
    ARENA_WS=workspace/arena-gain3p bash "$0" gain3p > "$OUT/gain3p.log" 2>&1 &
    arena benchmarks/arena-v6-train.toml aug --models GRU-gain3-13-aug
    wait; cat "$OUT/aug-oob.log" "$OUT/gain3p.log"; tail -n 5 "$OUT/gpu-tests-aug.log"
    ;;
  aug-oob)
    arena benchmarks/arena-v6-train.toml aug-oob --models GRU-gain3-13-aug-oob3
    ;;
  gain3p)
    arena benchmarks/arena-v6-train.toml gain3p --models GRU-gain3p-13
    ;;
  long3p)  # GRU-gain3p-13 with the phase augmentation at 480 epochs (~7 min beside another stage; the EVM target met)
    arena benchmarks/arena-v6-train.toml long3p --models GRU-gain3p-13-aug --epochs 480
    ;;
  gain3p-aug)  # GRU-gain3p-13 with the phase augmentation, 240 epochs (~2.5 min)
    arena benchmarks/arena-v6-train.toml gain3p-aug --models GRU-gain3p-13-aug
    ;;
  woob)  # the worse-side out-of-band term (w = 1, 2) on GRU-gain3p-13 with the augmentation, 480 epochs, two processes
          # beside its GPU test (~7.5 min)
    $PY -m pytest -q tests/gpu/test_arena_cuda.py -k "oob" > "$OUT/gpu-tests-woob.log" 2>&1 &
    ARENA_WS=workspace/arena-woob2 bash "$0" woob2 > "$OUT/woob2.log" 2>&1 &
    arena benchmarks/arena-v6-train.toml woob1 --models GRU-gain3p-13-aug-woob1 --epochs 480
    wait; cat "$OUT/woob2.log"; tail -n 5 "$OUT/gpu-tests-woob.log"
    ;;
  woob2)
    arena benchmarks/arena-v6-train.toml woob2 --models GRU-gain3p-13-aug-woob2 --epochs 480
    ;;
  woob-lr)  # the worse-side term (w = 1) with lr_end 1e-5, plateau and cosine schedules, 480 epochs, two processes
    ARENA_WS=workspace/arena-woob-cos bash "$0" woob-cos > "$OUT/woob-cos.log" 2>&1 &
    arena benchmarks/arena-v6-train.toml woob-lr --models GRU-gain3p-13-aug-woob1-lr1e-5 --epochs 480
    wait; cat "$OUT/woob-cos.log"
    ;;
  woob-cos)
    arena benchmarks/arena-v6-train.toml woob-cos --models GRU-gain3p-13-aug-woob1-cos --epochs 480
    ;;
  long)  # GRU-gain3-13 at 480 epochs
    arena benchmarks/arena-v6-train.toml long --models GRU-gain3-13 --epochs 480
    ;;
  dpa160-2p2)  # DPA_160MHz, peak gain, ACLR also in OpenDPD 2.2.1's convention (~5 min; carry DPA_160MHz as for dpa160)
    arena benchmarks/arena-dpa160-2p2.toml dpa160-2p2
    ;;
  dpa160-rms)  # DPA_160MHz at the PA's own output power (~7 min; carry DPA_160MHz as for dpa160): the first model's
               # process trains the PA; once its prepared.json is written the other three models start beside it in
               # the same workspace (each arena its own --out), reusing that PA
    W=workspace/arena-dpa160-rms
    start() { timeout 560 $PY -m dpd_desktop --workspace $W arena benchmarks/arena-dpa160-rms.toml --device cuda \
                --kernel fast --models "$1" --out "$OUT/dpa160-rms-$1" > "$OUT/dpa160-rms-$1.log" 2>&1 & }
    t0=$SECONDS
    start GRU-gain3-13-cfr0
    until test -f $W/arena/arena-dpa160-rms/dpa-160mhz/prepared.json || (( SECONDS - t0 > 400 )); do sleep 2; done
    echo "PA ready after $((SECONDS - t0)) s"
    start GRU-gain3-13-cfr1
    start GRU-gain3-13-cfr0-woob3
    start GRU-gain3-13
    wait
    echo "dpa160-rms: $((SECONDS - t0)) s wall"
    tail -n 12 "$OUT"/dpa160-rms-*.log
    $PY -m dpd_desktop --workspace $W arena --merge "$OUT"/dpa160-rms-GRU-gain3-13* --out "$OUT/dpa160-rms" \
      | tail -n 30 || true
    ;;
  dpa160-aligned)  # DPA_160MHz, peak gain, corrected ACLR on aligned windows and in 2.2.1's convention (~4 min)
    arena benchmarks/arena-dpa160-aligned.toml dpa160-aligned
    ;;
  dpa160)  # DPA_160MHz: its PA, then GRU-gain-14 and TRes-DeltaGRU-15 (~5 min; carry .ref/opendpd-2.4.2-arena/datasets/DPA_160MHz)
    arena benchmarks/arena-dpa160.toml dpa160
    ;;
  all)
    for s in test probe reproduce candidates; do bash "$0" "$s"; done
    ;;
  *) echo "usage: $0 test|probe|reproduce|candidates|pn|gain|train|train2|aug|aug-oob|gain3p|gain3p-aug|long3p|woob|woob2|woob-lr|woob-cos|long|dpa160|dpa160-2p2|dpa160-rms|dpa160-aligned|all" >&2; exit 2 ;;
esac
