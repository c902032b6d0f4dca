#!/bin/sh
# Runs each libFuzzer target (build/fuzz/fuzz_*) for FUZZ_SECONDS seconds, one
# after the other (the machine is shared: one fuzzer at a time), on its
# growing corpus (build/fuzz/corpus/T) seeded from build/fuzz/seed/T and
# fuzz/regressions/T, and prints executions and findings per target. A
# finding is saved as build/fuzz/crashes/T-<kind>-<hash>: copy it to
# fuzz/regressions/T/ once the bug is fixed (make test replays those); a
# GGUF finding becomes a case in tools/make-hostile.mjs instead (no model
# files in git).
#   sh tools/fuzz.sh [SECONDS] [TARGET...]
set -u
secs=${1:-60}; shift 2>/dev/null || true
targets=${*:-"gguf tokenize sampler state grammar"}
B=build/fuzz
status=0
printf '%-10s %14s %10s %8s %s\n' target executions exec/s findings corpus
for t in $targets; do
  mkdir -p $B/corpus/$t $B/crashes $B/logs
  case $t in gguf) maxlen=65536 ;; *) maxlen=1024 ;; esac
  dict=; [ -f fuzz/$t.dict ] && dict=-dict=fuzz/$t.dict
  log=$B/logs/$t.log
  before=$(ls $B/crashes | grep -c "^$t-" || true)
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    $B/fuzz_$t $B/corpus/$t $B/seed/$t fuzz/regressions/$t -max_total_time=$secs -max_len=$maxlen \
    $dict -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$B/crashes/$t- >$log 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' $log | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' $log | tail -1)
  after=$(ls $B/crashes | grep -c "^$t-" || true)
  found=$((after - before))
  [ $rc -ne 0 ] && [ $found -eq 0 ] && found="rc=$rc"
  printf '%-10s %14s %10s %8s %s\n' $t "${execs:-?}" "${rate:-?}" "$found" "$(ls $B/corpus/$t | wc -l) files"
  [ "$found" != 0 ] && { status=1; grep -m3 -E "ERROR|fuzz check failed|runtime error" $log; }
done
exit $status
