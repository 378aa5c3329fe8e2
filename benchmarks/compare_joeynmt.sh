#!/usr/bin/env bash
# Compare attnmt with JoeyNMT 2.3.0 on the same data, model size and wall-clock budget.
# Run `scripts/compare_joeynmt.sh --help` for the options; the steps are:
#   1. JoeyNMT 2.3.0 into its own venv (.venv-joeynmt/, never a dependency of attnmt);
#   2. attnmt: `train.py model=transformer trainer.time_budget_min=B` (or --attnmt-run DIR);
#   3. JoeyNMT's data, vocabulary and config from that run (scripts/compare_joeynmt.py
#      prepare): the run's own SentencePiece model and train pairs, its validation subset,
#      the same test split, the same sizes and optimiser settings;
#   4. JoeyNMT training, stopped by SIGINT B minutes after its first epoch starts;
#   5. greedy (the run's decode.beam) decoding of the test split with JoeyNMT's best
#      checkpoint (by validation BLEU, as attnmt's);
#   6. both hypothesis files scored by one sacrebleu call (BLEU 13a, chrF) against the same
#      reference file; outputs/compare_joeynmt/<time>/results.md and results.json.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/compare_joeynmt.sh [--budget-min M] [--quick] [--attnmt-run DIR] [--out DIR]
                                  [-- attnmt overrides ...]

Train attnmt (model=transformer) and JoeyNMT 2.3.0 for the same wall-clock budget on
ding_de_en, decode the test split with each, score both with the same sacrebleu call and
write a table to outputs/compare_joeynmt/<YYYYmmdd-HHMMSS>/results.md (and results.json).

  --budget-min M     training budget per system in minutes (default 12; the two runs are
                     sequential, so the whole comparison takes ~2M + 10 minutes)
  --quick            smoke test (~5 min): 1-minute budgets, validation every 50 updates on
                     50 pairs, a log line every 5 updates, scores on the first 100 test
                     sentences (a barely trained JoeyNMT model decodes every sentence to
                     the length limit: the whole split takes ~15 min on 2 busy cores)
  --test-lines N     score only the first N test sentences (default: all)
  --attnmt-run DIR   reuse a finished attnmt run instead of training one: its config and
                     SentencePiece model drive JoeyNMT's, its test hypotheses come from
                     `evaluate.py ckpt=DIR split=test`
  --out DIR          output directory (default outputs/compare_joeynmt/<time>)
  -- KEY=VALUE ...   extra Hydra overrides for the attnmt run (JoeyNMT mirrors the result)
  -h, --help         this text

Environment: JOEYNMT_VENV (default .venv-joeynmt), JOEYNMT_TORCH_SPEC (default
torch==2.13.0, the CPU wheel served by the local package index), PYTHON (default python3,
to create the venv). attnmt's .venv must exist (make setup).
EOF
}

log() { printf '[compare_joeynmt %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  printf 'compare_joeynmt: error: %s\n' "$*" >&2
  exit 1
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUDGET=12
QUICK=0
ATTNMT_RUN=""
OUT=""
TEST_LINES=""
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --budget-min) [ $# -ge 2 ] || die "--budget-min needs a value"; BUDGET="$2"; shift 2 ;;
    --budget-min=*) BUDGET="${1#*=}"; shift ;;
    --quick) QUICK=1; shift ;;
    --attnmt-run) [ $# -ge 2 ] || die "--attnmt-run needs a directory"; ATTNMT_RUN="$2"; shift 2 ;;
    --attnmt-run=*) ATTNMT_RUN="${1#*=}"; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a directory"; OUT="$2"; shift 2 ;;
    --out=*) OUT="${1#*=}"; shift ;;
    --test-lines) [ $# -ge 2 ] || die "--test-lines needs a number"; TEST_LINES="$2"; shift 2 ;;
    --test-lines=*) TEST_LINES="${1#*=}"; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

QUICK_OVERRIDES=()
if [ "$QUICK" = 1 ]; then
  BUDGET=1
  QUICK_OVERRIDES=(trainer.val_every_steps=50 trainer.val_subset=50 trainer.log_every_steps=5)
  TEST_LINES="${TEST_LINES:-100}"
fi
TEST_LINES="${TEST_LINES:-0}"
[[ "$TEST_LINES" =~ ^[0-9]+$ ]] || die "--test-lines '$TEST_LINES' is not a whole number"
[[ "$BUDGET" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--budget-min '$BUDGET' is not a number of minutes"
awk -v b="$BUDGET" 'BEGIN { exit !(b > 0) }' || die "--budget-min must be > 0"
if [ -n "$ATTNMT_RUN" ] && [ ${#EXTRA[@]} -gt 0 ]; then
  die "attnmt overrides after -- apply only when this script trains attnmt (no --attnmt-run)"
fi

PY="$ROOT/.venv/bin/python"
HELPER="$ROOT/scripts/compare_joeynmt.py"
[ -x "$PY" ] || die "attnmt's venv is missing: run 'make setup' first"
JOEYNMT_VENV="${JOEYNMT_VENV:-.venv-joeynmt}"
JPY="$JOEYNMT_VENV/bin/python"
OUT="${OUT:-outputs/compare_joeynmt/$(date +%Y%m%d-%H%M%S)}"
if [ -d "$OUT" ] && [ -n "$(ls -A "$OUT")" ]; then die "$OUT exists and is not empty"; fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
trap 'log "stopped; what was written is in $OUT"; exit 130' INT TERM

# ---- 1. JoeyNMT 2.3.0 in its own venv ----------------------------------------------------------
# `pip install joeynmt==2.3.0` with its dependencies does not work here: its metadata pins
# protobuf<3.21 (tensorboard needs newer) and pulls datasets/pandas/plotly/seaborn and dev
# tools (pylint, yapf, flake8, pytest) that training and decoding plain-text files never
# import, and a bare `torch` requirement would fetch the multi-GB CUDA build. So: the CPU
# torch wheel first, joeynmt with --no-deps, then what `python -m joeynmt train|translate`
# imports: importlib_metadata (helpers.py), sentencepiece 0.2.0 (the tokenizer),
# subword-nmt (imported by tokenizers.py), tensorboard (torch.utils.tensorboard), sacrebleu,
# matplotlib, tqdm, pyyaml, numpy, packaging, pillow. sacremoses (moses pretokenizer) is
# not needed: the SentencePiece model sees raw text, as in attnmt.
setup_joeynmt() {
  local stamp="$JOEYNMT_VENV/.installed-joeynmt-2.3.0"
  if [ -f "$stamp" ] && "$JPY" -c "import joeynmt.training, joeynmt.prediction" 2>/dev/null; then
    log "JoeyNMT 2.3.0: $JOEYNMT_VENV (installed)"
    return
  fi
  log "installing JoeyNMT 2.3.0 into $JOEYNMT_VENV (a minute or two)"
  [ -x "$JPY" ] || "${PYTHON:-python3}" -m venv "$JOEYNMT_VENV"
  "$JPY" -m pip install -q "${JOEYNMT_TORCH_SPEC:-torch==2.13.0}"
  "$JPY" -m pip install -q --no-deps "joeynmt==2.3.0"
  "$JPY" -m pip install -q importlib_metadata "sentencepiece==0.2.0" subword-nmt tensorboard \
    sacrebleu matplotlib tqdm pyyaml numpy packaging pillow
  "$JPY" -c "import joeynmt.training, joeynmt.prediction" ||
    die "JoeyNMT does not import in $JOEYNMT_VENV; remove it and run again"
  touch "$stamp"
}
setup_joeynmt
"$JPY" -m pip freeze >"$OUT/joeynmt-pip-freeze.txt" 2>/dev/null || true

# ---- 2. attnmt -------------------------------------------------------------------------------
if [ -n "$ATTNMT_RUN" ]; then
  [ -d "$ATTNMT_RUN" ] || die "--attnmt-run $ATTNMT_RUN is not a directory"
  RUN="$(cd "$ATTNMT_RUN" && pwd)"
  [ -f "$RUN/train.log" ] || die "$RUN has no train.log: not an attnmt run directory"
  log "attnmt: reusing the run $RUN"
else
  RUN="$OUT/attnmt"
  log "attnmt: training model=transformer for $BUDGET min into $RUN"
  "$PY" train.py model=transformer trainer.time_budget_min="$BUDGET" \
    ${QUICK_OVERRIDES[@]+"${QUICK_OVERRIDES[@]}"} ${EXTRA[@]+"${EXTRA[@]}"} \
    hydra.run.dir="$RUN" 2>&1 | tee "$OUT/attnmt-console.log" ||
    die "attnmt training failed (see $OUT/attnmt-console.log)"
fi

# ---- 3. JoeyNMT's data, vocabulary and config from the attnmt run ----------------------------
WORK="$OUT/joeynmt"
log "joeynmt: data, vocabulary and config from the attnmt run"
"$PY" "$HELPER" prepare --run "$RUN" --work "$WORK" --test-lines "$TEST_LINES"
setup_get() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
  "$WORK/setup.json" "$1"; }
BEAM="$(setup_get beam)"
TEST_SRC="$(setup_get test_src)"
N_TEST="$(setup_get test_pairs)"

A_HYPS="$RUN/hyps/test.txt" # a fresh run's own final test decoding (as evaluate.py does it)
if [ -n "$ATTNMT_RUN" ] || [ ! -f "$A_HYPS" ]; then
  log "attnmt: decoding the test split with evaluate.py (beam $BEAM)"
  "$PY" evaluate.py ckpt="$RUN" split=test beam="$BEAM" out_dir="$OUT/attnmt-eval" \
    2>&1 | tee "$OUT/attnmt-eval-console.log" || die "evaluate.py failed"
  A_HYPS="$OUT/attnmt-eval/hyps.txt"
fi
[ -f "$A_HYPS" ] || die "no attnmt test hypotheses at $A_HYPS"

# ---- 4. JoeyNMT training under the same budget -------------------------------------------------
log "joeynmt: training for $BUDGET min (log: $WORK/model/train.log)"
"$PY" "$HELPER" watch --budget-min "$BUDGET" --log "$WORK/model/train.log" \
  --out "$WORK/watch.json" --console "$WORK/train-console.log" -- \
  "$JPY" -m joeynmt train "$WORK/config.yaml" --skip-test ||
  die "JoeyNMT training failed (see $WORK/train-console.log)"

# ---- 5. JoeyNMT test decoding --------------------------------------------------------------------
# `translate -o FILE` crashes in 2.3.0 (AttributeError: 'BaseConfig' object has no attribute
# 'n_best'), so the hypotheses are read from stdout (the log goes to stderr).
J_HYPS="$WORK/hyps.test.txt"
log "joeynmt: decoding the test split ($N_TEST sentences, beam $BEAM)"
"$JPY" -m joeynmt translate "$WORK/config.yaml" <"$TEST_SRC" >"$J_HYPS" \
  2>"$WORK/translate-console.log" || die "JoeyNMT decoding failed (see $WORK/translate-console.log)"
N_HYPS="$(wc -l <"$J_HYPS")"
[ "$N_HYPS" -eq "$N_TEST" ] || die "JoeyNMT wrote $N_HYPS lines for $N_TEST test sentences"

# ---- 6. one scorer, one table ------------------------------------------------------------------
"$PY" "$HELPER" report --out "$OUT" --budget-min "$BUDGET" --attnmt-run "$RUN" \
  --attnmt-hyps "$A_HYPS" --joeynmt-work "$WORK" --joeynmt-hyps "$J_HYPS"
