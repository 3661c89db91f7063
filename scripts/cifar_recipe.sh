# shellcheck shell=bash disable=SC2154  # root, dir, epochs and seed are the caller's
# Sourced by scripts/compare_modes.sh and scripts/compare_precisions.sh: the one recipe whose runs
# docs/results.md compares. ResNet-20 on all of CIFAR-10, one-cycle, lr 0.1, Nesterov momentum
# 0.9, weight decay 1e-4, global batch 128. The caller sets root, dir, epochs and seed, and calls
# recipe_setup once, then run_recipe NAME [train_cifar flags…] for each run: NAME logs to
# DIR/NAME.jsonl and saves DIR/NAME.ckpt after every epoch; calling it again resumes an unfinished
# run and skips a finished one (job chaining).

recipe_setup() {
  train_cifar="${TRAIN_CIFAR:-$root/build/apps/train_cifar}"
  [ -x "$train_cifar" ] || { echo "error: $train_cifar not built: run scripts/test.sh or cmake --build build" >&2; exit 1; }
  # CIFAR-10 in its default place, which train_cifar finds without --data-dir.
  "$root/scripts/get_cifar10.sh" >/dev/null
  mkdir -p "$dir"
}

run_recipe() {
  local name="$1"; shift
  if [ -f "$dir/$name.jsonl" ] && grep -q "\"epoch\":$epochs," "$dir/$name.jsonl"; then
    echo "$name: finished already ($dir/$name.jsonl)"
    return
  fi
  local resume=()
  [ -f "$dir/$name.ckpt" ] && resume=(--resume "$dir/$name.ckpt")
  echo "$name: $(date -u '+%Y-%m-%d %H:%M UTC')"
  "$train_cifar" --arch resnet20 --epochs "$epochs" --schedule onecycle --lr 0.1 --momentum 0.9 \
    --nesterov --weight-decay 1e-4 --batch-size 128 --seed "$seed" \
    --save "$dir/$name.ckpt" --log-json "$dir/$name.jsonl" --no-progress "${resume[@]}" "$@"
}
