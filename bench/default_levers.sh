#!/usr/bin/env bash
# Time to quality of the default `kedro run` (built-in corpus, 2 x 128, 360 steps): each lever trains in a
# clone of this checkout after its data stages, validated every 20 steps, and the run summary's plateau
# sentence is printed (BENCHMARKS.md, "Time to quality by the report's plateau rule").
#   bash bench/default_levers.sh [WORKDIR] ["SEED ..."] ["LEVER ..."]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/levers}; seeds=${2:-42}; levers=${3:-defaults peak_x2 batch16 triangular mask_30_15 init_05}
rm -rf "$work"; mkdir -p "$work"; git clone -q "$root" "$work/p"
[ -d "$root/../shared" ] && ln -s "$(cd "$root/../shared" && pwd)" "$work/shared"
cd "$work/p"; export KEDRO_DISABLE_TELEMETRY=1
K="$root/.venv/bin/kedro"
"$K" run --pipelines ingestion,tokenization,sequences,tuning --params tuning.n_trials=0 > "$work/data.log" 2>&1
declare -A LEVER=(
  [defaults]=""
  [peak_x2]="training.learning_rate=0.004"
  [batch16]="training.batch_size=16"
  [triangular]="training.warmup_steps=180"
  [mask_30_15]="masking.schedule=linear,masking.probability=0.3,masking.final_probability=0.15"
  [combined]="training.warmup_steps=180,masking.schedule=linear,masking.probability=0.3,masking.final_probability=0.15"
  [init_05]="model.initializer_range=0.05"
  [bert]="model.initialisation=bert,model.initializer_range=0.02"
  [local_02]="model.initialisation=local,model.initializer_range=0.02"
  [local_05]="model.initialisation=local,model.initializer_range=0.05"
)
for seed in $seeds; do for name in $levers; do
  extra=${LEVER[$name]}; params="training.eval_every=20,training.seed=$seed,tuning.n_trials=0${extra:+,$extra}"
  # The tuning stage (without trials) resolves the masking section again: a lever that changed it must not
  # leave its masking to the next lever's run.
  stages=tuning,training
  start=$(date +%s)
  "$K" run --pipelines "$stages" --params "$params" > "$work/$name-$seed.log" 2>&1 || echo "$name failed: $work/$name-$seed.log"
  echo "$name seed $seed: $(( $(date +%s) - start )) s; $(grep -o 'validation left the unigram plateau.*\|validation never left.*' "$work/$name-$seed.log" | head -1)"
done; done
