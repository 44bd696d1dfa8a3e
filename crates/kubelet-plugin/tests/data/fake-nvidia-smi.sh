#!/bin/sh
# A stand-in nvidia-smi for dynamic MIG tests: H100 80GB GPUs in MIG mode, state kept in
# $FAKE_SMI_DIR (gpus: "index uuid" lines; instances: "uuid gi ci profile_id start mig_uuid"
# lines; next-gi: a counter; calls: every command line). Prints the real tool's formats.
# Faults: a file `fail-create` (the create fails with Insufficient Resources), `truncate`
# (the create prints its first line only), `fail-destroy` (-dgi fails).
set -u
D="${FAKE_SMI_DIR:?FAKE_SMI_DIR is not set}"
touch "$D/instances"
echo "$*" >> "$D/calls"
name() {
  case "$1" in
    19) echo 1g.10gb ;; 15) echo 1g.20gb ;; 14) echo 2g.20gb ;;
    9) echo 3g.40gb ;; 5) echo 4g.40gb ;; 0) echo 7g.80gb ;; *) echo "" ;;
  esac
}
size() {
  case "$1" in
    19) echo 1 ;; 15|14) echo 2 ;; 9|5) echo 4 ;; 0) echo 8 ;; *) echo 0 ;;
  esac
}
index_of() { awk -v u="$1" '$2 == u { print $1 }' "$D/gpus"; }
case "$*" in
  "-L")
    while read -r idx uuid; do
      echo "GPU $idx: NVIDIA H100 80GB HBM3 (UUID: $uuid)"
      n=0
      while read -r u gi ci pid start mig; do
        [ "$u" = "$uuid" ] || continue
        echo "  MIG $(name "$pid")     Device  $n: (UUID: $mig)"
        n=$((n + 1))
      done < "$D/instances"
    done < "$D/gpus"
    ;;
  "mig -lgi")
    if [ ! -s "$D/instances" ]; then echo "No GPU instances found: Not Found" >&2; exit 6; fi
    echo "+-------------------------------------------------------+"
    echo "| GPU instances:                                        |"
    echo "| GPU   Name             Profile  Instance   Placement  |"
    echo "|                          ID       ID       Start:Size |"
    echo "|=======================================================|"
    while read -r u gi ci pid start mig; do
      printf '|  %2s  MIG %-12s  %5s    %5s        %s:%s     |\n' "$(index_of "$u")" "$(name "$pid")" "$pid" "$gi" "$start" "$(size "$pid")"
      echo "+-------------------------------------------------------+"
    done < "$D/instances"
    ;;
  mig\ -i\ *\ -cgi\ *\ -C)
    gpu="$3"; pid="${5%%:*}"; start="${5##*:}"
    idx="$(index_of "$gpu")"
    if [ -z "$idx" ]; then echo "No GPU found with UUID $gpu" >&2; exit 6; fi
    sz="$(size "$pid")"
    if [ "$sz" = 0 ]; then echo "Unable to create a GPU instance on GPU $idx using profile $pid: Invalid Argument" >&2; exit 2; fi
    if [ -e "$D/fail-create" ]; then echo "Unable to create a GPU instance on GPU $idx using profile $pid: Insufficient Resources" >&2; exit 1; fi
    end=$((start + sz))
    while read -r u gi ci p s mig; do
      [ "$u" = "$gpu" ] || continue
      e=$((s + $(size "$p")))
      if [ "$start" -lt "$e" ] && [ "$s" -lt "$end" ]; then
        echo "Unable to create a GPU instance on GPU $idx using profile $pid: Insufficient Resources" >&2; exit 1
      fi
    done < "$D/instances"
    gi=$(cat "$D/next-gi" 2>/dev/null || echo 1)
    echo $((gi + 1)) > "$D/next-gi"
    mig="MIG-$(printf '%08x' "$gi")-0000-5000-8000-$(printf '%012d' "$start")"
    echo "$gpu $gi 0 $pid $start $mig" >> "$D/instances"
    echo "Successfully created GPU instance ID  $gi on GPU  $idx using profile MIG $(name "$pid") (ID $pid)"
    [ -e "$D/truncate" ] && exit 0
    echo "Successfully created compute instance ID  0 on GPU  $idx GPU instance ID  $gi using profile MIG $(name "$pid") (ID  0)"
    ;;
  mig\ -i\ *\ -gi\ *\ -ci\ *\ -dci)
    gpu="$3"; gi="$5"; idx="$(index_of "$gpu")"
    if ! awk -v u="$gpu" -v g="$gi" '$1 == u && $2 == g { f = 1 } END { exit !f }' "$D/instances"; then
      echo "Unable to destroy compute instance ID  $7 from GPU  $idx GPU instance ID  $gi: Not Found" >&2; exit 6
    fi
    echo "Successfully destroyed compute instance ID  $7 from GPU  $idx GPU instance ID  $gi"
    ;;
  mig\ -i\ *\ -gi\ *\ -dci)
    gpu="$3"; gi="$5"; idx="$(index_of "$gpu")"
    echo "Successfully destroyed compute instance ID  0 from GPU  $idx GPU instance ID  $gi"
    ;;
  mig\ -i\ *\ -gi\ *\ -dgi)
    gpu="$3"; gi="$5"; idx="$(index_of "$gpu")"
    if [ -e "$D/fail-destroy" ]; then echo "Unable to destroy GPU instance ID  $gi from GPU  $idx: In use by another client" >&2; exit 1; fi
    if ! awk -v u="$gpu" -v g="$gi" '$1 == u && $2 == g { f = 1 } END { exit !f }' "$D/instances"; then
      echo "Unable to destroy GPU instance ID  $gi from GPU  $idx: Not Found" >&2; exit 6
    fi
    awk -v u="$gpu" -v g="$gi" '!($1 == u && $2 == g)' "$D/instances" > "$D/instances.new"
    mv "$D/instances.new" "$D/instances"
    echo "Successfully destroyed GPU instance ID  $gi from GPU  $idx"
    ;;
  *)
    echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 9 ;;
esac
